/* The sanitizer's fault handler (see sanitizer_internal.h): an access to a quarantined host
 * buffer faults, and the buffer's two stacks are written before the fault takes its course. */
#include "sanitizer_internal.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>

static struct sigaction previous_segv, previous_bus;
static volatile sig_atomic_t fault_seen;

/* Numbers for the fault handler, without stdio (not async-signal-safe). */
static void write_number(uintptr_t value, int hex) {
  char digits[32];
  int n = sizeof digits;
  unsigned base = hex ? 16 : 10;
  do {
    digits[--n] = "0123456789abcdef"[value % base];
    value /= base;
  } while (value != 0);
  if (hex) {
    digits[--n] = 'x';
    digits[--n] = '0';
  }
  san_write_all(digits + n, sizeof digits - (size_t)n);
}

static void report_fault(uintptr_t addr) {
  /* Read without the lock (a signal handler cannot take it); see san_evict_one. */
  for (entry* e = san_q_head; e != NULL; e = e->qnext) {
    if (e->kind != DLI_SAN_BUFFER || addr < (uintptr_t)e->map ||
        addr >= (uintptr_t)e->map + e->map_len) {
      continue;
    }
    uintptr_t data = (uintptr_t)e->data;
    san_write_str("dlinterop sanitizer: access to released memory at ");
    write_number(addr, 1);
    san_write_str(", ");
    if (addr < data) {
      write_number(data - addr, 0);
      san_write_str(" bytes before");
    } else if (addr - data < e->nbytes) {
      write_number(addr - data, 0);
      san_write_str(" bytes into");
    } else {
      write_number(addr - data - e->nbytes, 0);
      san_write_str(" bytes past the end of");
    }
    san_write_str(" a buffer of ");
    write_number(e->nbytes, 0);
    san_write_str(" bytes dlinterop released\n  allocated at:\n");
    san_write_str(e->made ? e->made : "    (not recorded)\n");
    san_write_str("  released at:\n");
    san_write_str(e->released_at ? e->released_at : "    (not recorded)\n");
    return;
  }
}

static void on_fault(int sig, siginfo_t* info, void* context);

static int is_ours(const struct sigaction* action) {
  return (action->sa_flags & SA_SIGINFO) && action->sa_sigaction == on_fault;
}

static void default_action(int sig) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(sig, &action, NULL);
}

static void on_fault(int sig, siginfo_t* info, void* context) {
  (void)context;
  if (fault_seen) {
    /* Here again: the handler before this one raised the signal anew (faulthandler does,
     * having put this one back): the default action ends the process. */
    default_action(sig);
    return;
  }
  fault_seen = 1;
  /* si_code > 0: the kernel's report of a bad access (a raise() has no address). */
  if (info != NULL && info->si_code > 0) report_fault((uintptr_t)info->si_addr);
  /* The handler before this one (faulthandler's, or the default action: the process
   * ends) takes the fault when the access is tried again on return. */
  const struct sigaction* previous = sig == SIGSEGV ? &previous_segv : &previous_bus;
  if (is_ours(previous)) {
    default_action(sig);
  } else {
    sigaction(sig, previous, NULL);
  }
}

/* Puts on_fault first for `sig` unless it is there already, keeping the handler it
 * replaces (faulthandler, when enabled since) to pass faults on to. */
static void install(int sig, struct sigaction* previous) {
  struct sigaction current;
  if (sigaction(sig, NULL, &current) != 0 || is_ours(&current)) return;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  if (sigaction(sig, &action, previous) == 0) fault_seen = 0;
}

void san_install_fault_handler(void) {
  install(SIGSEGV, &previous_segv);
  install(SIGBUS, &previous_bus);
}
