#!/usr/bin/env python3
"""What a client receives when a file is truncated in place while it is being sent.

usage: truncate_under_send.py PORT ROOT_DIR [TRIALS]

A server on 127.0.0.1:PORT serves ROOT_DIR. For each trial: an 8 MiB file of known bytes
(never zero) is written to ROOT_DIR/f.bin (by rename), requested by a client with a 4 KiB
receive buffer, and once the answer has begun it is truncated to 1 MiB + 1000 bytes; the
client then reads what comes. Prints the Content-Length, the body bytes received, the first
offset that differs from the file, and how many body bytes are zero. A server that sends with
sendfile (zero-copy) can deliver zeros from the truncation point on: the kernel zeroes the
page-cache pages the socket still refers to; one that copies (read + write) cannot.
"""
import os
import socket
import sys
import time

port, root = int(sys.argv[1]), sys.argv[2]
trials = int(sys.argv[3]) if len(sys.argv) > 3 else 3
path = os.path.join(root, "f.bin")
data = bytes((i * 7 + 3) % 251 or 1 for i in range(8 << 20))
for _ in range(trials):
    with open(path + ".t", "wb") as f:
        f.write(data)
    os.chmod(path + ".t", 0o644)
    os.rename(path + ".t", path)
    time.sleep(1.2)  # past any cache's staleness bound
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /f.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    time.sleep(0.5)
    buf = s.recv(2000)
    os.truncate(path, (1 << 20) + 1000)
    s.settimeout(5)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            buf += d
    except OSError as e:
        print("read ended:", e)
    i = buf.index(b"\r\n\r\n")
    head, body = buf[:i].decode(), buf[i + 4 :]
    cl = [h for h in head.split("\r\n") if h.lower().startswith("content-length")]
    diff = next((k for k in range(len(body)) if body[k] != data[k]), None)
    print(cl, "body", len(body), "first difference at", diff, "zero bytes", body.count(0))
