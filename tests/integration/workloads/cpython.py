# Workloads that must run under the default seccomp policy. Prints one "ok NAME" line each.
import asyncio, hashlib, json, multiprocessing, os, re, socket, sqlite3, subprocess, sys
import tempfile, threading, time, zlib


def square(x):
    return x * x


def check(name, fn):
    try:
        fn()
        print("ok", name, flush=True)
    except Exception as e:  # report and go on: the test names what failed
        print("FAIL", name, type(e).__name__, e, flush=True)


def threads():
    out = []
    ts = [threading.Thread(target=out.append, args=(i,)) for i in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert sorted(out) == list(range(8))


def pool(method):
    ctx = multiprocessing.get_context(method)
    with ctx.Pool(2) as p:
        assert p.map(square, range(10)) == [x * x for x in range(10)]


def sub():
    out = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
    assert out.stdout == "42\n", out
    assert subprocess.run("echo shell", shell=True, capture_output=True, text=True).stdout == "shell\n"


async def echo():
    a, b = socket.socketpair()
    r, w = await asyncio.open_connection(sock=a)
    b.sendall(b"ping\n")
    assert await r.readline() == b"ping\n"
    w.close()
    b.close()


def tmp():
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "f"), "w") as f:
            f.write("x")
        assert os.listdir(d) == ["f"]
    with tempfile.NamedTemporaryFile() as f:
        f.write(b"y")


def sql():
    db = sqlite3.connect(":memory:")
    db.execute("create table t (x)")
    db.executemany("insert into t values (?)", [(i,) for i in range(100)])
    assert db.execute("select sum(x) from t").fetchone()[0] == 4950


if __name__ == "__main__":
    check("json", lambda: json.loads(json.dumps({"a": [1, 2.5, None]})))
    check("re", lambda: re.compile(r"(\w+)@(\w+)").findall("a@b c@d"))
    check("hashlib", lambda: hashlib.sha256(b"x").hexdigest() and hashlib.md5(b"x").hexdigest())
    check("zlib", lambda: zlib.decompress(zlib.compress(b"x" * 1000)))
    check("threading", threads)
    check("multiprocessing-fork", lambda: pool("fork"))
    check("multiprocessing-spawn", lambda: pool("spawn"))
    check("subprocess", sub)
    check("asyncio", lambda: asyncio.run(echo()))
    check("tempfile", tmp)
    check("sqlite3", sql)
    check("proc-status", lambda: "VmRSS" in open("/proc/self/status").read())
    check("cpu_count", lambda: os.cpu_count() >= 1)
    check("sleep", lambda: time.sleep(0.01))
    check("random", lambda: os.urandom(16))
