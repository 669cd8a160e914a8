package hashcache

import (
	"os"
	"syscall"
)

// StampOf is the identity and change stamps of a file as fstat reported
// them.
func StampOf(fi os.FileInfo) (Stamp, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Stamp{}, false
	}
	return Stamp{
		Dev: st.Dev, Ino: st.Ino, Size: st.Size,
		MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano(),
	}, true
}
