/* Kernel time of one write to a loopback TCP socket, by system call: writev with the head
 * and the body as two buffers (what mmgate did before BENCHMARKS.md item 47), writev with
 * one buffer, send with one buffer, and copying both into one buffer then send (what it
 * does now). Loopback only, no other network.
 *
 *   gcc -O2 -o /tmp/sendcost bench/sendcost.c && /tmp/sendcost 300 2048 2000
 *
 * Arguments: head bytes, body bytes, writes per batch. A connected pair of sockets with
 * large buffers; before each batch the receiver drains what is queued (not measured), then
 * the sender makes one batch of writes with one method while getrusage's system time
 * (RUSAGE_SELF) is read around it. The four methods take turns, 300 batches each; printed:
 * the mean system time per write. The receiver does not read during a batch, so the
 * absolute figures are higher than in a proxy (the data queues); the difference between
 * the methods is the cost of their paths into the socket.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static double system_seconds(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return r.ru_stime.tv_sec + r.ru_stime.tv_usec * 1e-6;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s HEAD_BYTES BODY_BYTES WRITES_PER_BATCH\n", argv[0]);
    return 2;
  }
  int hs = atoi(argv[1]), bs = atoi(argv[2]), m = atoi(argv[3]);
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  if (bind(l, (void *)&a, sizeof a) || listen(l, 1) || getsockname(l, (void *)&a, &al)) {
    perror("listen");
    return 1;
  }
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(c, (void *)&a, sizeof a)) {
    perror("connect");
    return 1;
  }
  int s = accept(l, 0, 0), one = 1, big = 64 << 20;
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(c, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  fcntl(s, F_SETFL, O_NONBLOCK);
  char *h = malloc(hs), *b = malloc(bs), *w = malloc(hs + bs), *d = malloc(1 << 22);
  memset(h, 'h', hs);
  memset(b, 'b', bs);
  const char *names[4] = {"writev, 2 buffers", "writev, 1 buffer", "send", "copy + send"};
  double total[4] = {0};
  const int batches = 300;
  for (int i = 0; i < batches; i++) {
    for (int k = 0; k < 4; k++) {
      while (read(s, d, 1 << 22) > 0) {
      }
      double t0 = system_seconds();
      for (int j = 0; j < m; j++) {
        if (k == 0) {
          struct iovec v[2] = {{h, hs}, {b, bs}};
          writev(c, v, 2);
        } else if (k == 1) {
          struct iovec v[1] = {{w, hs + bs}};
          writev(c, v, 1);
        } else if (k == 2) {
          send(c, w, hs + bs, MSG_NOSIGNAL);
        } else {
          memcpy(w, h, hs);
          memcpy(w + hs, b, bs);
          send(c, w, hs + bs, MSG_NOSIGNAL);
        }
      }
      total[k] += system_seconds() - t0;
    }
  }
  for (int k = 0; k < 4; k++) {
    printf("%-18s %.3f us of system time per write\n", names[k], total[k] / ((double)batches * m) * 1e6);
  }
  return 0;
}
