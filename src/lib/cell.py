# SPDX-License-Identifier: LGPL-2.1-or-later
# Notebook cells (nsbox run --cell, session code steps): the first part of the Python text that
# nsbox runs as `python3 -c` inside the sandbox (cell-run.py or session-repl.py follows it).
#
# A cell is Python source run in the real __main__ (so pickle, multiprocessing, dataclasses and
# inspect.getsource find what it defines) as Jupyter runs one: the value of a last expression
# is displayed (an "execute_result"), display() shows any object (a "display_data"),
# matplotlib's figures are shown on plt.show() and when the cell ends, and top-level `await`
# works. Outputs go, one JSON object a line, to the outputs channel (a descriptor the
# supervisor reads when the cell has ended, never stdout); an uncaught exception is printed to
# stderr as Python prints it, without this file's frames, and written as an "error" record.
#
# The display machinery is IPython's where the rootfs has it (DisplayFormatter: text/html of a
# DataFrame, _repr_png_, ...; matplotlib_inline's show()), imported only when a cell first has
# something to display; without IPython, text/plain is repr(). Everything here lives in the
# closure of _nsbox_cells(), so that __main__ holds nothing of nsbox's.


def _nsbox_cells():
    # Only what every cell needs, and cheap: _ast is the C half of ast (the module ast costs
    # 12 ms of imports), json, traceback and linecache (another 12 ms) come when needed.
    import _ast
    import builtins
    import os
    import sys

    # The MIME types kept, in the order a model reads them; the rest (LaTeX, JavaScript, PDF)
    # are left out.
    mimes = ("text/plain", "text/html", "text/markdown", "image/png", "image/jpeg",
             "image/svg+xml", "application/json")
    binary = ("image/png", "image/jpeg")
    st = {"fd": -1, "left": 0, "ipy": None, "codes": set(), "sources": {}}

    def write(record):
        import json
        line = (json.dumps(record, ensure_ascii=True, default=str) + "\n").encode()
        if st["fd"] < 0:
            return None
        if len(line) > st["left"]:
            return False
        st["left"] -= len(line)
        try:
            while line:
                line = line[os.write(st["fd"], line):]
        except OSError:
            st["fd"] = -1  # no channel (or a cell closed it): outputs are lost, not the cell
            return None
        return True

    def emit(kind, data, figure=None):
        """One output, within what is left of the budget: a matplotlib figure's PNG is drawn
        again at a lower resolution until it fits; another MIME type that does not fit is left
        out (text/plain stays) and the record says so ("dropped": {MIME: bytes})."""
        data = {k: v for k, v in data.items() if k in mimes}
        data["text/plain"] = str(data.get("text/plain", ""))
        for k in binary:
            if isinstance(data.get(k), (bytes, bytearray)):
                import base64
                data[k] = base64.b64encode(data[k]).decode()
            elif isinstance(data.get(k), str):
                data[k] = "".join(data[k].split())  # IPython's base64 ends with a newline
        record = {"type": kind, "data": data}
        if write(record) is not False:
            return
        if figure is not None and "image/png" in data:
            import base64
            import io
            dpi = figure.dpi
            while dpi > 20:
                dpi /= 2
                buf = io.BytesIO()
                figure.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
                data["image/png"] = base64.b64encode(buf.getvalue()).decode()
                if write(record) is not False:
                    return
        dropped = {}
        def size(v):
            import json
            return len(v) if isinstance(v, str) else len(json.dumps(v, default=str))
        for k in sorted(data, key=lambda k: -size(data[k])):
            if k != "text/plain":
                dropped[k] = size(data.pop(k))
                record["dropped"] = dropped
                if write(record) is not False:
                    return
        text = data["text/plain"]
        data["text/plain"] = text[:200] + "..."
        dropped["text/plain"] = len(text) - 200
        record["dropped"] = dropped
        write(record)

    def rootfs_has(name):
        """Whether the module is found outside the working directory and the user site, which a
        session's program steps write: its IPython, imported here without the cell asking,
        would run in a session's interpreter (session-repl.py has these after the rootfs's on
        sys.path; a cell that imports the module itself gets what sys.path finds)."""
        import importlib.machinery
        import site
        mine = ("", os.getcwd(), site.getusersitepackages())
        return importlib.machinery.PathFinder.find_spec(
            name, [p for p in sys.path if p not in mine]) is not None

    def ipython():
        """IPython's shell, made once (about 20 ms after the import of IPython, 300 ms), whose
        display formatter and display() (IPython.display's too) write to the outputs channel;
        or None without IPython. It runs no cell: only its display machinery is used."""
        if st["ipy"] is not None:
            return st["ipy"] or None
        st["ipy"] = False
        try:
            if "IPython" not in sys.modules and not rootfs_has("IPython"):
                return None
            from IPython.core.displaypub import DisplayPublisher
            from IPython.core.interactiveshell import InteractiveShell
            from traitlets.config import Config
        except Exception:
            return None

        class Publisher(DisplayPublisher):
            def publish(self, data, metadata=None, source=None, *, transient=None,
                        update=False, **kwargs):
                fig = st.pop("fig", None)
                data = dict(data)
                if fig is not None and "image/png" not in data:
                    data["image/png"] = png(fig)
                emit("display_data", data, figure=fig)

            def clear_output(self, wait=False):
                pass

        main = sys.modules["__main__"]
        before = dict(vars(main))
        config = Config()
        config.HistoryManager.enabled = False
        shell = InteractiveShell.instance(config=config, user_module=main)
        shell.display_pub = Publisher(shell=shell, parent=shell)
        fmt = shell.display_formatter
        fmt.active_types = [m for m in fmt.active_types if m in mimes]
        real = fmt.format

        def format(obj, include=None, exclude=None):
            st["fig"] = figure_of(obj)
            return real(obj, include, exclude)
        fmt.format = format
        # The shell's In/Out/_ih/... stay (as in Jupyter); exit and quit stay Python's (the
        # shell's would not end the cell).
        for name in ("exit", "quit"):
            vars(main).pop(name, None)
        for name in set(vars(main)) - set(before):
            if name.startswith("_") and name not in ("_ih", "_oh", "_dh"):
                vars(main).pop(name, None)
        st["ipy"] = shell
        return shell

    def inline_backend():
        """matplotlib-inline as matplotlib's backend (it shows figures with display()), where
        the rootfs has it and the backend is still the rootfs's default, Agg."""
        mpl = sys.modules.get("matplotlib")
        if mpl is None or str(mpl.rcParams.get("backend", "")).lower() != "agg":
            return
        try:
            # The rootfs's (see rootfs_has()): matplotlib imports the backend by its name.
            if not rootfs_has("matplotlib_inline") or ipython() is None:
                return
        except Exception:
            return
        mpl.rcParams["backend"] = "module://matplotlib_inline.backend_inline"

    def fmt_data(obj):
        shell = ipython() if want_ipython(obj) else None
        data = None
        if shell is not None:
            try:
                data, _ = shell.display_formatter.format(obj)
            except Exception:
                data = None
        if not data:
            try:
                data = {"text/plain": repr(obj)}
            except Exception as e:
                data = {"text/plain": "<repr failed: %s>" % type(e).__name__}
        fig = figure_of(obj)
        if fig is not None and "image/png" not in data:
            data["image/png"] = png(fig)
        return data

    def png(fig):
        # As matplotlib-inline draws a figure (IPython's print_figure: tight bounding box).
        import io
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()

    def want_ipython(obj):
        # Values of Python's own types (numbers, strings, lists, dicts, ...) need no IPython,
        # whose import costs 0.3-0.5 s of CPU: their text is repr(). Other objects may offer
        # more (_repr_html_, a figure): IPython's formatters ask them.
        return st["ipy"] or type(obj).__module__ != "builtins"

    def display(*objs, include=None, exclude=None, metadata=None, transient=None,
                display_id=None, raw=False, clear=False, **kwargs):
        """Show each object as a display_data output (IPython's display(), in a cell)."""
        for obj in objs:
            if raw and isinstance(obj, dict):
                emit("display_data", dict(obj))
            else:
                emit("display_data", fmt_data(obj), figure=figure_of(obj))

    def figure_of(obj):
        mpl = sys.modules.get("matplotlib.figure")
        return obj if mpl is not None and isinstance(obj, mpl.Figure) else None

    def figures():
        """matplotlib's open figures, shown and closed (plt.show() under Agg, and at the cell's
        end): through matplotlib-inline where it is the backend, else drawn here."""
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        inline = sys.modules.get("matplotlib_inline.backend_inline")
        if inline is not None:
            inline.flush_figures()
        from matplotlib._pylab_helpers import Gcf
        for manager in Gcf.get_all_fig_managers():
            fig = manager.canvas.figure
            emit("display_data", fmt_data(fig), figure=fig)
        if Gcf.get_all_fig_managers():
            pyplot.close("all")

    def hook_pyplot():
        # Agg's show() does nothing (no display): in a cell it shows the open figures.
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None and getattr(pyplot.show, "__name__", "") == "show" and \
                "agg" in str(pyplot.get_backend()).lower() and \
                "inline" not in str(pyplot.get_backend()):
            def nsbox_show(*args, **kwargs):
                figures()
            pyplot.show = nsbox_show

    class Finder:
        """Chooses matplotlib's backend when a cell imports pyplot; makes the shell when it
        imports IPython (so that IPython.display.display() is the cell's)."""

        def find_spec(self, name, path=None, target=None):
            if name not in ("matplotlib.pyplot", "IPython", "linecache"):
                return None
            import importlib.machinery
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            real = spec.loader.exec_module

            def exec_module(module):
                if name == "linecache":
                    real(module)
                    module.cache.update(st["sources"])
                    return
                if name == "IPython":
                    real(module)
                    ipython()
                    return
                inline_backend()
                real(module)
                hook_pyplot()
            spec.loader.exec_module = exec_module
            return spec

    def error_record(e, tb):
        import traceback
        lines = traceback.format_exception(type(e), e, tb)
        return {"type": "error", "name": type(e).__name__,
                "value": str(e),
                "traceback": "".join(lines).splitlines()}

    def own_frames_cut(e):
        """The traceback without any frame of this file: the exec here at its start, the SIGINT
        handler that raised KeyboardInterrupt on a timeout at its end, display() between."""
        frames = []
        tb = e.__traceback__
        while tb is not None:
            frames.append(tb)
            tb = tb.tb_next
        kept = [t for t in frames if t.tb_frame.f_code not in st["codes"]]
        if len(kept) == len(frames):
            return e.__traceback__
        import types
        head = None
        for t in reversed(kept):
            head = types.TracebackType(head, t.tb_frame, t.tb_lasti, t.tb_lineno)
        return head

    def report(e):
        tb = own_frames_cut(e)
        e.__traceback__ = tb
        import traceback
        traceback.print_exception(type(e), e, tb)
        write(error_record(e, tb))

    def compile_cell(source, filename):
        """The cell's code: its body, and its last expression apart (to be displayed)."""
        flags = _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = compile(source, filename, "exec", _ast.PyCF_ONLY_AST | flags, dont_inherit=True)
        last = None
        # A last line ending in ";" displays nothing, as in Jupyter.
        if tree.body and isinstance(tree.body[-1], _ast.Expr) and \
                not source.rstrip().endswith(";"):
            last = _ast.Expression(tree.body.pop().value)
            last = compile(last, filename, "eval", flags, dont_inherit=True)
        body = compile(tree, filename, "exec", flags, dont_inherit=True)
        return body, last

    def run_code(code, scope):
        # CO_COROUTINE (inspect.CO_COROUTINE; Include/cpython/code.h): a top-level await.
        if code.co_flags & 0x80:
            # One event loop for the session's cells, as a notebook kernel has: tasks a cell
            # started go on in the next cell that awaits.
            if "loop" not in st:
                import asyncio
                st["loop"] = asyncio.new_event_loop()
            return st["loop"].run_until_complete(eval(code, scope))
        return eval(code, scope)

    def run(source, filename, fd, limit, scope, on_start=None):
        """Run one cell; outputs to fd (at most limit bytes). Returns (exit status,
        interrupted)."""
        st["fd"], st["left"] = fd, limit
        if isinstance(source, bytes):
            source = source.decode("utf-8", "surrogateescape")
        # Its source for tracebacks and inspect.getsource (no mtime: linecache keeps it); to
        # linecache when it is imported, if it is not yet (Finder).
        entry = (len(source), None, source.splitlines(True), filename)
        st["sources"][filename] = entry
        if "linecache" in sys.modules:
            sys.modules["linecache"].cache[filename] = entry
        builtins.display = display
        status, interrupted = 0, False
        try:
            try:
                body, last = compile_cell(source, filename)
                if on_start:
                    on_start()
                run_code(body, scope)
                if last is not None:
                    value = run_code(last, scope)
                    if value is not None:
                        builtins._ = value
                        emit("execute_result", fmt_data(value), figure=figure_of(value))
            finally:
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except Exception:
                        pass
        except SystemExit as e:
            if e.code is None:
                status = 0
            elif isinstance(e.code, int):
                status = e.code & 0xFF
            else:
                print(e.code, file=sys.stderr)
                status = 1
        except KeyboardInterrupt as e:
            report(e)
            status, interrupted = 1, True
        except BaseException as e:
            report(e)
            status = 1
        finally:
            try:
                figures()
            except BaseException:
                pass
            st["fd"] = -1
        return status, interrupted

    def own(code):
        """code and every code object in it: frames a traceback leaves out."""
        st["codes"].add(code)
        for c in code.co_consts:
            if hasattr(c, "co_consts"):
                own(c)

    sys.meta_path.insert(0, Finder())
    own(_nsbox_cells.__code__)
    return run, own
