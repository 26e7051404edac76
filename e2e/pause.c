/* The pod sandbox's process for the e2e cluster's pause image (written for sexton; no image
 * can be pulled here). It holds the pod's namespaces: sleeps until SIGINT or SIGTERM and
 * reaps any child that is reparented to it. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
  struct sigaction a = {0};
  a.sa_handler = stop;
  sigaction(SIGINT, &a, NULL);
  sigaction(SIGTERM, &a, NULL);
  a.sa_handler = reap;
  a.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &a, NULL);
  for (;;) pause();
}
