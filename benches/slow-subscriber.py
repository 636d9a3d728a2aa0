#!/usr/bin/env python3
"""benches/slow-subscriber.py PORT: a subscriber that never reads (4 KB
receive buffer) and a publisher sending 1 KB messages in pipelines of 100
until the server cuts the subscriber off; prints the peak of used_memory
over its start (INFO memory after each pipeline) and where it ends. Run it
against a fresh ringdb or redis-server with the default
`client-output-buffer-limit pubsub 32mb 8mb 60`."""
import socket, sys, time, redis
port = int(sys.argv[1])
sub = socket.create_connection(('127.0.0.1', port))
sub.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
sub.sendall(b'SUBSCRIBE ch\r\n'); time.sleep(0.2)
r = redis.Redis(port=port)
base = int(r.info('memory')['used_memory'])
peak = 0; msg = b'x' * 1024
t0 = time.time()
while time.time() - t0 < 20:
    p = r.pipeline(transaction=False)
    for _ in range(100): p.publish('ch', msg)
    res = p.execute()
    used = int(r.info('memory')['used_memory']); peak = max(peak, used)
    if res[-1] == 0: break
stats = r.info('stats')
print(f"port {port}: peak used_memory {(peak-base)/1048576:.1f} MiB above start; subscribers at end {res[-1]}; disconnections {stats.get('client_output_buffer_limit_disconnections')}; {time.time()-t0:.1f}s")
time.sleep(2); print(f"  after: used_memory {(int(r.info('memory')['used_memory'])-base)/1048576:.1f} MiB above start")
