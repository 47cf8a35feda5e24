# The driver of mcpcell's `python` tool: one persistent interpreter per MCP session,
# running in the session's cell as the sandbox user (a background process under cell
# init). Embedded in the mcpcell binary (tools/CMakeLists.txt) and written into the cell
# when an interpreter starts. Run as: python3 -u driver.py
#
# Requests arrive on stdin, framed: an ASCII decimal length, "\n", then that many bytes of
# JSON: {"id", "code", "stdout", "stderr", "response"} (paths in the cell). For each, the
# code runs in one namespace kept across requests, with file descriptors 1 and 2 (so
# subprocesses and C code too) redirected into the request's stdout and stderr files. The
# value of a final expression is returned as its repr; open matplotlib figures are saved as
# PNG and closed. The answer is JSON written to the response path (to a temporary name,
# then renamed, so the server never reads half of it).
#
# SIGINT (the server's interrupt on a timeout or a cancellation) raises KeyboardInterrupt
# only while user code runs; one that comes between requests is ignored, so it cannot
# break the driver's own work. The user code's own stdin is /dev/null.
import ast
import base64
import io
import json
import os
import signal
import sys
import traceback

MAX_REPR = 64 * 1024
MAX_FIGURES = 4
MAX_FIGURE_BYTES = 2 * 1024 * 1024

_protocol = os.fdopen(os.dup(0), "rb", buffering=0)
_devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(_devnull, 0)
sys.stdin = open(os.devnull, "r")
_namespace = {"__name__": "__main__", "__builtins__": __builtins__}
_in_user_code = False


def _on_sigint(signum, frame):
    if _in_user_code:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, _on_sigint)


def _read_exactly(n):
    chunks = []
    while n > 0:
        chunk = _protocol.read(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _read_request():
    header = b""
    while not header.endswith(b"\n"):
        byte = _protocol.read(1)
        if not byte:
            return None
        header += byte
        if len(header) > 20:
            raise ValueError("request frame header too long")
    body = _read_exactly(int(header))
    return None if body is None else json.loads(body)


def _user_traceback(error):
    if isinstance(error, SyntaxError):
        return "".join(traceback.format_exception_only(type(error), error))
    tb = error.__traceback__
    # The first frames are the driver's own (_run_code): the user's code starts below.
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb))


def _run_code(code):
    """Returns (repr of the final expression or None, error text or None, interrupted)."""
    global _in_user_code
    try:
        tree = ast.parse(code, "<python>", "exec")
    except SyntaxError as error:
        return None, _user_traceback(error), False
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    _in_user_code = True
    try:
        exec(compile(tree, "<python>", "exec"), _namespace)
        if last is not None:
            value = eval(compile(last, "<python>", "eval"), _namespace)
            if value is not None:
                _namespace["_"] = value
                text = repr(value)
                if len(text) > MAX_REPR:
                    text = text[:MAX_REPR] + "... [repr cut at %d characters]" % MAX_REPR
                return text, None, False
        return None, None, False
    except KeyboardInterrupt as error:
        return None, _user_traceback(error), True
    except BaseException as error:  # SystemExit too: the interpreter stays
        return None, _user_traceback(error), False
    finally:
        _in_user_code = False


def _figures():
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return [], []
    images, notes = [], []
    try:
        for number in pyplot.get_fignums():
            if len(images) >= MAX_FIGURES:
                notes.append("figure %d not returned: at most %d per call" % (number, MAX_FIGURES))
                continue
            buffer = io.BytesIO()
            pyplot.figure(number).savefig(buffer, format="png")
            data = buffer.getvalue()
            if len(data) > MAX_FIGURE_BYTES:
                notes.append("figure %d not returned: its PNG is %d bytes, over %d"
                             % (number, len(data), MAX_FIGURE_BYTES))
                continue
            images.append(base64.b64encode(data).decode("ascii"))
    except Exception as error:  # a broken figure must not lose the call's answer
        notes.append("saving figures failed: %r" % (error,))
    finally:
        pyplot.close("all")
    return images, notes


def _serve(request):
    saved = os.dup(1), os.dup(2)
    sys.stdout.flush()
    sys.stderr.flush()
    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    os.close(err)
    try:
        result, error, interrupted = _run_code(request["code"])
        images, notes = _figures()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
    answer = {"id": request["id"], "result": result, "error": error,
              "interrupted": interrupted, "images": images, "notes": notes}
    temporary = request["response"] + ".part"
    with open(temporary, "w") as f:
        json.dump(answer, f)
    os.rename(temporary, request["response"])


def _find_matplotlibrc():
    """Debian's matplotlib reads its defaults from /etc/matplotlibrc, which a cell's own /etc
    does not have: point MATPLOTLIBRC at the copy in matplotlib's data directory instead."""
    if "MATPLOTLIBRC" in os.environ or os.path.exists("/etc/matplotlibrc"):
        return
    import importlib.util
    candidates = ["/usr/share/matplotlib/mpl-data/matplotlibrc"]
    try:
        spec = importlib.util.find_spec("matplotlib")
        if spec is not None and spec.origin:
            candidates.insert(0, os.path.join(os.path.dirname(spec.origin), "mpl-data",
                                              "matplotlibrc"))
    except (ImportError, ValueError):
        return
    for candidate in candidates:
        if os.path.exists(candidate):
            os.environ["MATPLOTLIBRC"] = candidate
            return


def main():
    os.environ.setdefault("MPLBACKEND", "Agg")
    _find_matplotlibrc()
    while True:
        try:
            request = _read_request()
        except KeyboardInterrupt:
            continue
        if request is None:
            return
        _serve(request)


if __name__ == "__main__":
    main()
