# The first thing a data-analysis agent runs, one library per run: python3 science.py NAME.
# Prints "ok NAME DETAIL" when the workload finished and its answer is right.
import sys


def numpy_matmul():
    import numpy as np
    a = np.ones((500, 500))
    s = (a @ a).sum()
    assert s == 500.0 ** 3, s
    return f"sum {s:.0f}"


def pandas_groupby():
    import io
    import pandas as pd
    csv = "city,temp\n" + "".join(f"{c},{t}\n" for c in ("paris", "oslo", "rome") for t in range(100))
    df = pd.read_csv(io.StringIO(csv))
    means = df.groupby("city")["temp"].mean()
    assert list(means) == [49.5, 49.5, 49.5], means
    return f"{len(df)} rows, {len(means)} groups"


def matplotlib_savefig():
    import os
    import matplotlib
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [0, 1, 4])
    fig.savefig("/tmp/plot.png")
    with open("/tmp/plot.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    return f"backend {matplotlib.get_backend()}, {os.path.getsize('/tmp/plot.png')} bytes"


def scipy_minimize():
    from scipy.optimize import minimize, rosen
    r = minimize(rosen, [1.3, 0.7, 0.8, 1.9, 1.2], method="BFGS")
    assert r.success and abs(r.x - 1).max() < 1e-3, r
    return f"minimum at {r.x.round(3).tolist()}"


def threads():
    import os
    import numpy  # loads OpenBLAS, which threadpoolctl then finds among the loaded libraries
    import threadpoolctl
    blas = [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    return f"affinity {len(os.sched_getaffinity(0))} blas {blas} cpu_count {os.cpu_count()}"


name = sys.argv[1]
print("ok", name, globals()[name]())
