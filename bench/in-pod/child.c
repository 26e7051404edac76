/* Benchmark child: timestamps taken inside the processes being measured, with
 * CLOCK_MONOTONIC (one clock for every PID namespace on the machine).
 *   child exit  OUT        write now() to OUT, exit 0            (a main that finishes)
 *   child term  OUT READY  block SIGTERM, create READY, wait for SIGTERM, write now(), exit 0
 *   child start OUT        write now(), exit 0                   (start overhead)
 *   child idle             sleep until killed                    (an idle sidecar)
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void put(int fd, long long v) {
    char b[32];
    int n = snprintf(b, sizeof b, "%lld\n", v);
    if (pwrite(fd, b, n, 0) != n) _exit(3);
}

static int open_out(const char *p) {
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(4);
    return fd;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "exit")) {
        int fd = open_out(argv[2]);
        put(fd, now());
        _exit(0);
    }
    if (argc >= 3 && !strcmp(argv[1], "start")) {
        long long t = now();
        put(open_out(argv[2]), t);
        _exit(0);
    }
    if (argc >= 4 && !strcmp(argv[1], "term")) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigprocmask(SIG_BLOCK, &set, NULL);
        int fd = open_out(argv[2]);
        close(open_out(argv[3]));
        siginfo_t info;
        while (sigwaitinfo(&set, &info) != SIGTERM) {}
        put(fd, now());
        _exit(0);
    }
    if (argc >= 2 && !strcmp(argv[1], "idle")) {
        for (;;) pause();
    }
    fprintf(stderr, "usage: child exit OUT | term OUT READY | start OUT | idle\n");
    return 2;
}
