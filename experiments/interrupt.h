/* interrupt.h: Ctrl-C and SIGTERM in the commands.
 *
 * The handler only records the signal. Every long phase polls
 * interrupt_signal() and stops where it is safe: training saves a checkpoint,
 * evaluation and sampling stop with it, ./spectrum and ./extrapolate stop
 * before writing anything. The command then exits 128 + the signal, the
 * shell's convention: 130 for Ctrl-C, 143 for SIGTERM. */
#ifndef ATTNLAB_INTERRUPT_H
#define ATTNLAB_INTERRUPT_H

/* Installs the handler for SIGINT and SIGTERM. */
void interrupt_install(void);
/* The signal received (SIGINT or SIGTERM), or 0. */
int interrupt_signal(void);
/* 128 + that signal (130 when none was received). */
int interrupt_exit_status(void);

#endif
