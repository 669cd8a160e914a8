#include "textflag.h"

// Each function below forks with a raw clone(2) and runs the child entirely
// in this file: a child of a multi-threaded Go program must not touch the Go
// runtime. Children end with exit_group(2); their status is the result.
// The parent functions return the clone result: the child's pid, or
// -errno.

// FAULT_SIGNALS_DEFAULT resets SIGSEGV and SIGSYS to their default action
// (kill) and makes the process non-dumpable (no core file). A raw child
// inherits the Go runtime's handlers: without this, a fault (int $0x80 on a
// kernel without the i386 ABI) or a SECCOMP_RET_TRAP would run the runtime's
// handler in the child, which prints "fatal error: fault" and exits with
// status 2 - read as an errno, ENOENT. Uses the 32-byte frame at 0(SP) as a
// zeroed struct sigaction (sa_handler SIG_DFL).
#define FAULT_SIGNALS_DEFAULT \
	MOVQ $0, 0(SP); \
	MOVQ $0, 8(SP); \
	MOVQ $0, 16(SP); \
	MOVQ $0, 24(SP); \
	MOVQ $11, DI; /* SIGSEGV */ \
	MOVQ SP, SI; \
	XORQ DX, DX; \
	MOVQ $8, R10; \
	MOVQ $13, AX; /* SYS_rt_sigaction */ \
	SYSCALL; \
	MOVQ $31, DI; /* SIGSYS */ \
	MOVQ SP, SI; \
	XORQ DX, DX; \
	MOVQ $8, R10; \
	MOVQ $13, AX; \
	SYSCALL; \
	MOVQ $4, DI; /* PR_SET_DUMPABLE */ \
	XORQ SI, SI; \
	XORQ DX, DX; \
	XORQ R10, R10; \
	XORQ R8, R8; \
	MOVQ $157, AX; /* SYS_prctl */ \
	SYSCALL

// func rawClone(flags uintptr) (ret int64)
// clone(flags); the child exits 0 at once.
TEXT ·rawClone(SB), NOSPLIT, $0-16
	MOVQ flags+0(FP), DI
	XORQ SI, SI
	XORQ DX, DX
	XORQ R10, R10
	XORQ R8, R8
	MOVQ $56, AX // SYS_clone
	SYSCALL
	CMPQ AX, $0
	JEQ  child
	MOVQ AX, ret+8(FP)
	RET
child:
	XORQ DI, DI
	MOVQ $231, AX // SYS_exit_group
	SYSCALL
	JMP  child

// func rawClone3(args uintptr, size uintptr) (ret int64)
// clone3(args, size); the child exits 0 at once.
TEXT ·rawClone3(SB), NOSPLIT, $0-24
	MOVQ args+0(FP), DI
	MOVQ size+8(FP), SI
	MOVQ $435, AX // SYS_clone3
	SYSCALL
	CMPQ AX, $0
	JEQ  child
	MOVQ AX, ret+16(FP)
	RET
child:
	XORQ DI, DI
	MOVQ $231, AX // SYS_exit_group
	SYSCALL
	JMP  child

// func forkUnshare(flags uintptr) (ret int64)
// fork; the child calls unshare(flags) and exits with its errno (0 on
// success).
TEXT ·forkUnshare(SB), NOSPLIT, $0-16
	MOVQ flags+0(FP), R12
	MOVQ $17, DI // SIGCHLD
	XORQ SI, SI
	XORQ DX, DX
	XORQ R10, R10
	XORQ R8, R8
	MOVQ $56, AX // SYS_clone
	SYSCALL
	CMPQ AX, $0
	JEQ  child
	MOVQ AX, ret+8(FP)
	RET
child:
	MOVQ R12, DI
	MOVQ $272, AX // SYS_unshare
	SYSCALL
	NEGQ AX
	MOVQ AX, DI
exit:
	MOVQ $231, AX // SYS_exit_group
	SYSCALL
	JMP  exit

// func forkPause() (ret int64)
// fork; the child asks for SIGKILL when its parent thread dies and pauses
// until it is killed.
TEXT ·forkPause(SB), NOSPLIT, $0-8
	MOVQ $17, DI // SIGCHLD
	XORQ SI, SI
	XORQ DX, DX
	XORQ R10, R10
	XORQ R8, R8
	MOVQ $56, AX // SYS_clone
	SYSCALL
	CMPQ AX, $0
	JEQ  child
	MOVQ AX, ret+0(FP)
	RET
child:
	MOVQ $1, DI // PR_SET_PDEATHSIG
	MOVQ $9, SI // SIGKILL
	XORQ DX, DX
	XORQ R10, R10
	XORQ R8, R8
	MOVQ $157, AX // SYS_prctl
	SYSCALL
pause:
	MOVQ $34, AX // SYS_pause
	SYSCALL
	JMP  pause

// func forkInt80() (ret int64)
// fork; the child resets its fault signals, calls getpid through the 32-bit
// x86 ABI (int $0x80, eax 20) and exits 0 when that returned a pid, else
// with the errno. On a kernel without the i386 ABI int $0x80 faults (a
// general protection fault, SIGSEGV) before any seccomp filter sees it.
TEXT ·forkInt80(SB), NOSPLIT, $32-8
	MOVQ $17, DI // SIGCHLD
	XORQ SI, SI
	XORQ DX, DX
	XORQ R10, R10
	XORQ R8, R8
	MOVQ $56, AX // SYS_clone
	SYSCALL
	CMPQ AX, $0
	JEQ  child
	MOVQ AX, ret+0(FP)
	RET
child:
	FAULT_SIGNALS_DEFAULT
	MOVL $20, AX // __NR_getpid on i386
	INT  $0x80
	MOVLQSX AX, AX
	XORQ DI, DI
	CMPQ AX, $0
	JGE  exit
	NEGQ AX
	MOVQ AX, DI
exit:
	MOVQ $231, AX // SYS_exit_group
	SYSCALL
	JMP  exit

// func forkX32() (ret int64)
// fork; the child resets its fault signals, calls getpid through the x32
// ABI (syscall number 39 | __X32_SYSCALL_BIT) and exits 0 when that
// returned a pid, else with the errno. This is the syscall instruction:
// a kernel without x32 answers ENOSYS, it never faults.
TEXT ·forkX32(SB), NOSPLIT, $32-8
	MOVQ $17, DI // SIGCHLD
	XORQ SI, SI
	XORQ DX, DX
	XORQ R10, R10
	XORQ R8, R8
	MOVQ $56, AX // SYS_clone
	SYSCALL
	CMPQ AX, $0
	JEQ  child
	MOVQ AX, ret+0(FP)
	RET
child:
	FAULT_SIGNALS_DEFAULT
	MOVQ $0x40000027, AX
	SYSCALL
	XORQ DI, DI
	CMPQ AX, $0
	JGE  exit
	NEGQ AX
	MOVQ AX, DI
exit:
	MOVQ $231, AX // SYS_exit_group
	SYSCALL
	JMP  exit

// func forkFault() (ret int64)
// fork; the child resets its fault signals as forkInt80's does and raises
// a general protection fault (int $0x81: no user-callable gate), as int
// $0x80 does on a kernel without the i386 ABI. Tests use it to show that
// such a fault reaches the parent as a death by SIGSEGV.
TEXT ·forkFault(SB), NOSPLIT, $32-8
	MOVQ $17, DI // SIGCHLD
	XORQ SI, SI
	XORQ DX, DX
	XORQ R10, R10
	XORQ R8, R8
	MOVQ $56, AX // SYS_clone
	SYSCALL
	CMPQ AX, $0
	JEQ  child
	MOVQ AX, ret+0(FP)
	RET
child:
	FAULT_SIGNALS_DEFAULT
	INT  $0x81
	XORQ DI, DI
exit:
	MOVQ $231, AX // SYS_exit_group
	SYSCALL
	JMP  exit
