/* Benchmark load generator: unrelated files in a graveyard at a steady, paced rate.
 *   churn DIR RATE SECONDS create   create noise-N (open O_CREAT, write, close), N = 0, 1, ...
 *   churn DIR RATE SECONDS cycle    the same, each file unlinked right after its close
 *   churn DIR 0 0 clean             unlink every noise-* file in DIR
 * Pacing: file i is due at start + i/RATE (absolute CLOCK_MONOTONIC deadlines, 1 ns timer
 * slack), one file per deadline, so a watcher sees a steady stream, not bursts; a late
 * generator catches up without sleeping. Prints "files=N elapsed_ns=T cpu_ns=C late=L"
 * (L: files written more than 1 ms after their deadline).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void sleep_until(long long ns) {
    struct timespec t = {ns / 1000000000LL, ns % 1000000000LL};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL)) {}
}

/* the size of a real tombstone */
static const char BODY[] =
    "{\"Born\":\"2026-01-01T00:00:00.000000000Z\",\"Died\":\"2026-01-01T00:00:01.000000000Z\",\"ExitCode\":0}\n";

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: churn DIR RATE SECONDS create|cycle|clean\n");
        return 2;
    }
    const char *dir = argv[1];
    double rate = atof(argv[2]), secs = atof(argv[3]);
    const char *mode = argv[4];
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) { perror(dir); return 1; }
    if (!strcmp(mode, "clean")) {
        DIR *d = fdopendir(dup(dfd));
        struct dirent *e;
        long n = 0;
        while ((e = readdir(d)))
            if (!strncmp(e->d_name, "noise-", 6) && !unlinkat(dfd, e->d_name, 0)) n++;
        printf("removed=%ld\n", n);
        return 0;
    }
    int cycle = !strcmp(mode, "cycle");
    if (!cycle && strcmp(mode, "create")) { fprintf(stderr, "bad mode %s\n", mode); return 2; }
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    long total = (long)(rate * secs);
    double step = 1e9 / rate;
    long late = 0;
    char name[64];
    long long t0 = now() + 1000000; /* first file 1 ms from now */
    sleep_until(t0);
    for (long i = 0; i < total; i++) {
        long long due = t0 + (long long)(i * step);
        long long t = now();
        if (t < due) sleep_until(due);
        else if (t - due > 1000000) late++;
        snprintf(name, sizeof name, "noise-%ld", i);
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) { perror(name); return 1; }
        if (write(fd, BODY, sizeof BODY - 1) != (ssize_t)(sizeof BODY - 1)) { perror("write"); return 1; }
        close(fd);
        if (cycle) unlinkat(dfd, name, 0);
    }
    long long elapsed = now() - t0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long long cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
                    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
    printf("files=%ld elapsed_ns=%lld cpu_ns=%lld late=%ld\n", total, elapsed, cpu, late);
    return 0;
}
