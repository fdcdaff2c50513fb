/* The Pod sandbox's process for the end-to-end node (the image containerd's CRI plugin
 * starts first in every Pod; no registry is reachable here, so it is built locally by
 * test/e2e/control-plane.sh). It holds the Pod's namespaces, reaps the orphans it
 * inherits as PID 1, and exits 0 on SIGTERM or SIGINT. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  int saved = errno;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("topogate-e2e-pause 1");
    return 0;
  }
  struct sigaction stop = {.sa_handler = on_stop};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
  if (sigaction(SIGTERM, &stop, NULL) != 0 || sigaction(SIGINT, &stop, NULL) != 0 ||
      sigaction(SIGCHLD, &child, NULL) != 0) {
    perror("pause: sigaction");
    return 1;
  }
  for (;;) pause();
}
