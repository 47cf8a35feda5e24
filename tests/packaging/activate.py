#!/usr/bin/env python3
"""Execs PROGRAM with a listening TCP socket on ADDR:PORT as fd 3 and LISTEN_FDS=1,
LISTEN_PID=its own pid, as systemd's socket activation does, without waiting for a
connection first (systemd-socket-activate does). Usage: activate.py ADDR:PORT PROGRAM ARGS..."""
import os
import socket
import sys


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    host, port = sys.argv[1].rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(16)
    if sock.fileno() != 3:
        os.dup2(sock.fileno(), 3)  # dup2's copy is inheritable
    else:
        os.set_inheritable(3, True)
    os.environ["LISTEN_FDS"] = "1"
    os.environ["LISTEN_PID"] = str(os.getpid())  # exec keeps the pid
    os.execvp(sys.argv[2], sys.argv[2:])


if __name__ == "__main__":
    main()
