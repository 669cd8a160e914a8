package policy

// Permissions are permission levels, as a manifest declares them
// (permissions.network.level, filesystem.level, code_execution.level) or as
// a ceiling allows them.
type Permissions struct {
	Network       string // none < restricted < unrestricted
	Filesystem    string // none < temp < workspace_read < workspace_write < any
	CodeExecution string // none < limited_subprocess < shell
}

// The permission kinds, in the order they are checked.
const (
	permNetwork = iota + 1
	permFilesystem
	permCodeExecution
)

var permNames = [...]string{permNetwork: "network", permFilesystem: "filesystem", permCodeExecution: "code_execution"}

// levelRank returns the rank of a permission level on its ladder, or -1 for
// a level the ladder does not have (including "").
func levelRank(kind int, level string) int {
	switch kind {
	case permNetwork:
		switch level {
		case "none":
			return 0
		case "restricted":
			return 1
		case "unrestricted":
			return 2
		}
	case permFilesystem:
		switch level {
		case "none":
			return 0
		case "temp":
			return 1
		case "workspace_read":
			return 2
		case "workspace_write":
			return 3
		case "any":
			return 4
		}
	case permCodeExecution:
		switch level {
		case "none":
			return 0
		case "limited_subprocess":
			return 1
		case "shell":
			return 2
		}
	}
	return -1
}

// permProblem is why a declared level does not fit under a ceiling.
type permProblem int

const (
	permOK permProblem = iota
	permAbove
	permBadDeclared
	permBadCeiling
)

// checkCeiling compares the declared permissions with the ceiling. An empty
// ceiling level means no limit for that kind. With a limit, the declared
// level must be a known level at or below it; an unknown ceiling level is an
// error too (fail closed). It returns the first kind that fails.
func checkCeiling(declared, ceiling Permissions) (kind int, problem permProblem) {
	for k := permNetwork; k <= permCodeExecution; k++ {
		d, c := pick(declared, k), pick(ceiling, k)
		if c == "" {
			continue
		}
		cr := levelRank(k, c)
		if cr < 0 {
			return k, permBadCeiling
		}
		dr := levelRank(k, d)
		if dr < 0 {
			return k, permBadDeclared
		}
		if dr > cr {
			return k, permAbove
		}
	}
	return 0, permOK
}

func pick(p Permissions, kind int) string {
	switch kind {
	case permNetwork:
		return p.Network
	case permFilesystem:
		return p.Filesystem
	case permCodeExecution:
		return p.CodeExecution
	}
	return ""
}
