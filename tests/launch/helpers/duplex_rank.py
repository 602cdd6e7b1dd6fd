#!/usr/bin/python3
"""One rank of a chain over emulated hosts: each rank but the last sends
BYTES to the next while each but the first receives BYTES from the one
before, at once. Prints the rate each receiver measured, in bit/s."""
import os, socket, sys, threading, time

PORT = 47311
rank = int(os.environ["GIANT_RANK"])
size = int(os.environ["GIANT_WORLD_SIZE"])
nbytes = int(sys.argv[1])
subnet = os.environ["GIANT_STORE_ADDR"].split(":")[0].rsplit(".", 1)[0]
result = {}

def receive(listener):
    conn, _ = listener.accept()
    got, start = 0, None
    while got < nbytes:
        chunk = conn.recv(1 << 20)
        if not chunk:
            raise SystemExit("the sender closed early")
        if start is None:
            start = time.monotonic()
        got += len(chunk)
    result["bits_per_s"] = nbytes * 8 / (time.monotonic() - start)
    conn.sendall(b"k")
    conn.close()

def send():
    address = (subnet + "." + str(rank // int(os.environ["GIANT_LOCAL_WORLD_SIZE"]) + 2), PORT)
    deadline = time.monotonic() + 20
    while True:
        try:
            sock = socket.create_connection(address, timeout=20)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    sock.sendall(bytes(nbytes))
    sock.recv(1)
    sock.close()

threads = []
if rank > 0:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", PORT))
    listener.listen(1)
    threads.append(threading.Thread(target=receive, args=(listener,)))
if rank + 1 < size:
    threads.append(threading.Thread(target=send))
for t in threads:
    t.start()
for t in threads:
    t.join()
if rank > 0:
    print("received_bits_per_s=%.0f" % result["bits_per_s"])
