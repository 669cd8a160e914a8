#include "textflag.h"

// func int80(nr uintptr) uintptr
TEXT ·int80(SB), NOSPLIT, $0-16
	MOVQ nr+0(FP), AX
	INT  $0x80
	MOVQ AX, ret+8(FP)
	RET

// func int81()
// int $0x81 has no user-callable gate: a general protection fault, as int
// $0x80 raises on a kernel without the i386 ABI.
TEXT ·int81(SB), NOSPLIT, $0-0
	INT  $0x81
	RET
