package main

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/sdk/sandbox/subid"
)

// Every sandbox runs in a user namespace of its own. Its ids map into the
// block of subordinate ids `agentnode setup` reserved for agentnode in
// /etc/subuid and /etc/subgid (sdk/sandbox/subid), and each run gets a slot
// of that block no other live run holds: container root (the ids libcontainer's
// init sets the container up with; the tool never runs as it) and the
// sandbox user (profile uid/gid 1000) map to two host ids of the slot,
// nothing else is mapped. So the tool's uid is no host account's (files of
// the host user it might reach are "others'" to it) and no other
// sandbox's (two concurrent sandboxes cannot signal or ptrace each other,
// nor share files by owner). Host files owned by ids outside the slot (the
// image, /pack, both owned by root) show as the overflow ids inside and are
// reached through their "other" permissions.
//
// A slot is held by an exclusive flock on /run/agentnode-ids/<range>/<slot>
// for the run's life: the kernel drops it when the holder dies, so no slot
// leaks, and concurrent plugin processes (one per agentnode process, of any
// agentnode on the machine) never share one.

// The files of the reservation are subid.UIDFile and subid.GIDFile unless
// these variables name others. They are for tests: agentnode starts its
// plugins with an environment of its own making, which never has them.
const (
	subUIDFileEnv = "AGENTNODE_TEST_SUBUID_FILE"
	subGIDFileEnv = "AGENTNODE_TEST_SUBGID_FILE"
)

// subidFiles returns the reservation's files.
func subidFiles() (uidFile, gidFile string) {
	uidFile, gidFile = subid.UIDFile, subid.GIDFile
	if p := os.Getenv(subUIDFileEnv); p != "" {
		uidFile = p
	}
	if p := os.Getenv(subGIDFileEnv); p != "" {
		gidFile = p
	}
	return uidFile, gidFile
}

// slotSize is the number of host ids one run maps: container root and the
// sandbox user.
const slotSize = 2

// sandboxID is the profile's sandbox user and group (specs/sandbox/profile.json).
const sandboxID = 1000

// slotTries bounds the search for a free slot.
const slotTries = 64

// errNoFreeSlot: every slot tried was held by a live run.
var errNoFreeSlot = errors.New("no free slot of subordinate ids")

// slotLocks is where the slot lock files live: one directory per
// reservation, machine-wide and not under the state root, so every
// agentnode on this machine (whatever state root it runs with) takes its
// slots from the same locks, and no two live sandboxes share host ids.
const slotLocks = "/run/agentnode-ids"

// idsDir holds the slot lock files of the reservation r.
func idsDir(r subid.Range) string {
	return filepath.Join(slotLocks, fmt.Sprintf("%d-%d", r.Start, r.Count))
}

// reservation returns agentnode's subordinate uid and gid ranges, which must
// be the same (Reserve writes them so) and hold at least one slot.
func (b *backend) reservation() (subid.Range, error) {
	ur, err := subid.Lookup(b.subuidFile)
	if err != nil {
		return subid.Range{}, err
	}
	gr, err := subid.Lookup(b.subgidFile)
	if err != nil {
		return subid.Range{}, err
	}
	if ur != gr {
		return subid.Range{}, fmt.Errorf("%s reserves %s for %s but %s reserves %s (run `agentnode setup` after making them the same)",
			b.subuidFile, ur, subid.Name, b.subgidFile, gr)
	}
	return ur, nil
}

// idSlot is one run's hold on a slot of the reservation.
type idSlot struct {
	host uint32   // the host id of container root; host+1 is the sandbox user's
	lock *os.File // flocked while the run lives
	// rootless (rootless.go): container root is the invoking user
	// (uid, gid) and the sandbox user is host+1 and ghost+1 of the user's
	// own subordinate uid and gid ranges.
	rootless bool
	uid, gid int
	ghost    uint32
}

// release drops the hold.
func (s *idSlot) release() {
	if s != nil && s.lock != nil {
		_ = s.lock.Close()
	}
}

// acquireSlot takes a free slot of r, starting at a random one.
func (b *backend) acquireSlot(r subid.Range) (*idSlot, error) {
	n := r.Count / slotSize
	if n == 0 {
		return nil, fmt.Errorf("the reservation %s holds no slot of %d ids", r, slotSize)
	}
	dir := idsDir(r)
	if b.rootless {
		dir = filepath.Join(b.stateRoot+"-ids", fmt.Sprintf("%d-%d", r.Start, r.Count))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("slot locks: %w", err)
	}
	var seed [4]byte
	_, _ = rand.Read(seed[:])
	first := binary.LittleEndian.Uint32(seed[:]) % n
	for i := range uint32(min(n, slotTries)) {
		slot := (first + i) % n
		f, err := os.OpenFile(filepath.Join(dir, strconv.FormatUint(uint64(slot), 10)), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("slot locks: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			return nil, fmt.Errorf("slot locks: %w", err)
		}
		return &idSlot{host: r.Start + slot*slotSize, lock: f}, nil
	}
	return nil, fmt.Errorf("%w in %s (%d tried)", errNoFreeSlot, r, min(n, slotTries))
}

// mappings are the run's uid (and, identical, gid) mappings.
func (s *idSlot) mappings() []configs.IDMap {
	return []configs.IDMap{
		{ContainerID: 0, HostID: int64(s.host), Size: 1},
		{ContainerID: sandboxID, HostID: int64(s.host) + 1, Size: 1},
	}
}

// uidMappings and gidMappings are the run's mappings: mappings(), or for a
// rootless run the user itself as container root.
func (s *idSlot) uidMappings() []configs.IDMap {
	if !s.rootless {
		return s.mappings()
	}
	return []configs.IDMap{{ContainerID: 0, HostID: int64(s.uid), Size: 1}, {ContainerID: sandboxID, HostID: int64(s.host) + 1, Size: 1}}
}

func (s *idSlot) gidMappings() []configs.IDMap {
	if !s.rootless {
		return s.mappings()
	}
	return []configs.IDMap{{ContainerID: 0, HostID: int64(s.gid), Size: 1}, {ContainerID: sandboxID, HostID: int64(s.ghost) + 1, Size: 1}}
}

// userNamespace takes a slot of the reservation and puts config into a
// user namespace mapped onto it. The caller releases the slot. nil, nil
// only for the benchmark's backend without one (noUserNS).
func (b *backend) userNamespace(config *configs.Config) (*idSlot, error) {
	if b.noUserNS {
		return nil, nil
	}
	if b.rootless {
		return b.rootlessUserNamespace(config)
	}
	ids, err := b.reservation()
	if err != nil {
		return nil, err
	}
	slot, err := b.acquireSlot(ids)
	if err != nil {
		return nil, err
	}
	applyUserNS(config, slot)
	return slot, nil
}

// applyUserNS puts config into a new user namespace mapped onto slot. The
// other namespaces, created with it, are owned by it.
func applyUserNS(config *configs.Config, slot *idSlot) {
	config.Namespaces.Add(configs.NEWUSER, "")
	config.UIDMappings = slot.uidMappings()
	config.GIDMappings = slot.gidMappings()
}

// idmapWorkspace makes the workspace's bind mount (the profile's mount at
// path) an idmapped mount: the workspace directory's owner and group on
// the host are the sandbox user and group inside (the slot's second host
// id), every other id stays unmapped (the overflow ids). So the tool has
// the owner's access to the workspace it was granted, which a writable
// workspace needs (its ids are not the owner's), and what it creates there
// belongs to the owner on the host, not to a subordinate id.
func idmapWorkspace(config *configs.Config, path string, slot *idSlot) error {
	if slot == nil {
		return nil // the benchmark's backend without a user namespace
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	for _, m := range config.Mounts {
		if m.Destination != path || !m.IsBind() {
			continue
		}
		m.IDMapping = &configs.MountIDMapping{
			UIDMappings: []configs.IDMap{{ContainerID: int64(st.Uid), HostID: int64(slot.host) + 1, Size: 1}},
			GIDMappings: []configs.IDMap{{ContainerID: int64(st.Gid), HostID: int64(slot.host) + 1, Size: 1}},
		}
		return nil
	}
	return fmt.Errorf("workspace: the profile has no bind mount at %s", path)
}
