package spec

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The storage part of a spec: [storage.NAME] tables, and the storage key
// of a [node.NAME] that names one. A node that names none keeps its files
// on the lab's data directory (local). docs/storage.md describes the
// classes.

// Storage kinds (Storage.Kind).
const (
	StorageLocal  = "local"  // the lab's data directory on the machine's disk
	StorageMemory = "memory" // a tmpfs of Size
	StorageSAN    = "san"    // a block device served from Site across the links (nbdkit, nbdfuse, loop, ext4)
	StorageNAS    = "nas"    // a file system served from Site across the links (SFTP, sshfs)
)

// StorageKinds lists the kinds, for errors and docs.
var StorageKinds = []string{StorageLocal, StorageMemory, StorageSAN, StorageNAS}

// Storage defaults and limits.
const (
	DefaultStorageSize = 1 << 30
	MinStorageSize     = 64 << 20 // a PostgreSQL cluster with some WAL fits
	MaxStorageSize     = 1 << 40
	MaxStorageDelay    = time.Second
)

// Storage is one [storage.NAME] table: where the files of the nodes that
// name it live. Every such node gets a volume of its own (a tmpfs, a block
// device, a directory on the served file system) of this class.
type Storage struct {
	Name string
	Kind string // one of StorageKinds
	// Site serves the volumes of a san or nas storage: its server
	// processes run there, and their bytes cross the links between it
	// and each node's site.
	Site string
	// SizeBytes is each volume's size (memory, san); 0 for local and nas.
	SizeBytes int64
	// Delay is added to every read and every write a san's server
	// answers (nbdkit's delay filter): whole milliseconds.
	Delay time.Duration
	// Journal gives a san volume's ext4 its journal (default on, as
	// mkfs.ext4 does: docs/storage.md has what each costs).
	Journal bool
	// IOPS and BandwidthBps limit a san volume's block device: I/O
	// operations and bytes per second, each of reads and of writes, for
	// the processes of the node's site (cgroup blkio/io throttling); 0 =
	// no limit.
	IOPS         int64
	BandwidthBps int64
	Line         int
}

var (
	storageKeys   = []string{"kind", "site", "size", "delay", "journal", "iops", "bandwidth"}
	storageNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,14}$`)
)

// StorageOf returns the storage node's files live on, or nil for the
// local disk.
func (s *Spec) StorageOf(node string) *Storage {
	n := s.Node(node)
	if n == nil || n.Storage == "" {
		return nil
	}
	for i := range s.Storages {
		if s.Storages[i].Name == n.Storage {
			return &s.Storages[i]
		}
	}
	return nil
}

// storages reads every [storage.NAME].
func (c *decoder) storages(root map[string]any, s *Spec) []Storage {
	v, present := root["storage"]
	if !present {
		return nil
	}
	p := path{"storage"}
	m, ok := c.table(p, v, `write one [storage.NAME] table per storage, with kind = "san", "nas", "memory" or "local"`)
	if !ok {
		return nil
	}
	sites := map[string]bool{}
	var siteNames []string
	for _, st := range s.Sites {
		sites[st.Name] = true
		siteNames = append(siteNames, st.Name)
	}
	var out []Storage
	for _, name := range c.keysByPos(p, m) {
		sp := p.child(name)
		c.remember(s, sp)
		st := Storage{Name: name, Line: c.d.line(sp)}
		if !storageNameRE.MatchString(name) {
			c.failAt(sp, "storage name must be 1 to 15 characters of a-z, 0-9 and '-', starting with a letter")
		}
		sm, ok := c.table(sp, m[name], fmt.Sprintf(`write [storage.%s] with kind = "san", "nas", "memory" or "local"`, showKey(name)))
		if !ok {
			continue
		}
		c.storage(s, sp, sm, &st, sites, siteNames)
		out = append(out, st)
	}
	return out
}

func (c *decoder) storage(s *Spec, p path, m map[string]any, st *Storage, sites map[string]bool, siteNames []string) {
	c.checkKeys(p, m, storageKeys, "[storage."+showKey(st.Name)+"]")
	for _, k := range storageKeys {
		if _, present := m[k]; present {
			c.remember(s, p.child(k))
		}
	}
	kinds := `one of "local", "memory", "san", "nas"`
	if v, ok := c.get(p, m, "kind", kString, kinds); ok {
		st.Kind = strings.TrimSpace(v.(string))
		if !contains(StorageKinds, st.Kind) {
			c.fail(p.child("kind"), v, "unknown kind%s; kinds: %s", didYouMean(st.Kind, StorageKinds), strings.Join(StorageKinds, ", "))
			st.Kind = ""
		}
	} else if _, present := m["kind"]; !present {
		c.failAt(p, "kind is required: %s", kinds)
	}
	served := st.Kind == StorageSAN || st.Kind == StorageNAS
	only := func(key string, ok bool, which string) bool {
		if _, present := m[key]; !present || st.Kind == "" {
			return false
		}
		if !ok {
			c.failAt(p.child(key), "has no meaning for kind = %q; %s", st.Kind, which)
			return false
		}
		return true
	}
	if v, ok := c.get(p, m, "site", kString, `a site name like "store"`); ok && only("site", served, "only a san or nas is served from a site") {
		st.Site = strings.TrimSpace(v.(string))
		if !sites[st.Site] {
			c.fail(p.child("site"), v, "unknown site%s; defined sites: %s", didYouMean(st.Site, siteNames), strings.Join(siteNames, ", "))
		}
	} else if _, present := m["site"]; !present && served {
		c.failAt(p, `a %s is served from a site: add site = "SITE", the site its server runs in`, st.Kind)
	}
	if st.Kind == StorageMemory || st.Kind == StorageSAN {
		st.SizeBytes = DefaultStorageSize
	}
	st.Journal = st.Kind == StorageSAN
	if v, ok := c.get(p, m, "size", kString, `a string with a unit, like "1GiB"`); ok && only("size", st.Kind == StorageMemory || st.Kind == StorageSAN, "only memory and san volumes have a size") {
		b, msg := parseSize(v.(string))
		if msg == "" && (b < MinStorageSize || b > MaxStorageSize) {
			msg = "must be between 64MiB and 1TiB"
		}
		if msg != "" {
			c.fail(p.child("size"), v, "%s", msg)
		} else {
			st.SizeBytes = b
		}
	}
	if v, ok := c.get(p, m, "delay", kString, `a string with a unit, like "5ms"`); ok && only("delay", st.Kind == StorageSAN, "a delay per operation is built for san only") {
		d, msg := parseDurationMax(v.(string), MaxStorageDelay)
		if msg == "" && d%time.Millisecond != 0 {
			msg = "want whole milliseconds, like \"5ms\" (nbdkit 1.32's delay filter takes no finer delay)"
		}
		if msg != "" {
			c.fail(p.child("delay"), v, "%s", msg)
		} else {
			st.Delay = d
		}
	}
	if v, ok := c.get(p, m, "journal", kBool, "true or false"); ok && only("journal", st.Kind == StorageSAN, "only a san volume gets a file system made by replab") {
		st.Journal = v.(bool)
	}
	if v, ok := c.get(p, m, "iops", kInt, "an integer number of operations per second, like 500"); ok && only("iops", st.Kind == StorageSAN, "only a san is a block device here") {
		if n := v.(int64); n < 1 || n > 10_000_000 {
			c.fail(p.child("iops"), v, "want operations per second between 1 and 10000000")
		} else {
			st.IOPS = n
		}
	}
	if v, ok := c.get(p, m, "bandwidth", kString, `a size per second, like "50MB/s"`); ok && only("bandwidth", st.Kind == StorageSAN, "only a san is a block device here") {
		b, msg := parseBandwidth(v.(string))
		if msg != "" {
			c.fail(p.child("bandwidth"), v, "%s", msg)
		} else {
			st.BandwidthBps = b
		}
	}
}

// parseBandwidth reads bytes per second written as a size and "/s":
// "50MB/s", "10MiB/s".
func parseBandwidth(s string) (int64, string) {
	t, ok := strings.CutSuffix(strings.TrimSpace(s), "/s")
	if !ok {
		return 0, `want a size per second, like "50MB/s" or "10MiB/s"`
	}
	b, msg := parseSize(t)
	if msg != "" {
		return 0, msg
	}
	if b < 4096 {
		return 0, "must be at least 4KiB/s"
	}
	return b, ""
}

// nodeStorage checks the storage every node names, and that a served
// storage's site can be reached from the node's site over the links.
func (c *decoder) nodeStorage(s *Spec) {
	byName := map[string]*Storage{}
	var names []string
	for i := range s.Storages {
		byName[s.Storages[i].Name] = &s.Storages[i]
		names = append(names, s.Storages[i].Name)
	}
	sort.Strings(names)
	for _, n := range s.Nodes {
		if n.Storage == "" {
			continue
		}
		fp := path{"node", n.Name, "storage"}
		st := byName[n.Storage]
		if st == nil {
			defined := "none: add a [storage." + showKey(n.Storage) + "] table"
			if len(names) > 0 {
				defined = strings.Join(names, ", ")
			}
			c.failAt(fp, "unknown storage %q%s; defined storages: %s", clean(n.Storage), didYouMean(n.Storage, names), defined)
			continue
		}
		if st.Site == "" || n.Site == "" || st.Site == n.Site {
			continue
		}
		if !reachable(s.Links, n.Site, st.Site) {
			c.failAt(fp, "storage %s is served from site %s, which no chain of [[link]]s joins to site %s", st.Name, st.Site, n.Site)
		}
	}
}

// reachable says whether links join a to b, directly or through other sites.
func reachable(links []Link, a, b string) bool {
	seen := map[string]bool{a: true}
	queue := []string{a}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		if x == b {
			return true
		}
		for _, l := range links {
			for _, y := range [][2]string{{l.A, l.B}, {l.B, l.A}} {
				if y[0] == x && !seen[y[1]] {
					seen[y[1]] = true
					queue = append(queue, y[1])
				}
			}
		}
	}
	return false
}
