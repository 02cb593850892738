package storage

import (
	"fmt"
	"strings"

	"replab/internal/spec"
	"replab/internal/units"
)

// Describe says in one line what a storage is made of, every default
// resolved: "san served from store, 1.0 GiB, ext4 without journal, 5ms per
// read and write, 500 iops, 20.0 MiB/s".
func Describe(s spec.Storage) string {
	var parts []string
	switch s.Kind {
	case spec.StorageLocal:
		parts = append(parts, "local: the lab's data directory")
	case spec.StorageMemory:
		parts = append(parts, "memory: tmpfs of "+units.Bytes(float64(s.SizeBytes)))
	case spec.StorageSAN:
		parts = append(parts, "san served from "+s.Site+" (nbdkit; nbdfuse, loop device in the node's site)", units.Bytes(float64(s.SizeBytes)))
		if s.Journal {
			parts = append(parts, "ext4 with journal")
		} else {
			parts = append(parts, "ext4 without journal")
		}
		if s.Delay > 0 {
			parts = append(parts, s.Delay.String()+" per read and write")
		}
		if s.IOPS > 0 {
			parts = append(parts, fmt.Sprintf("%d iops", s.IOPS))
		}
		if s.BandwidthBps > 0 {
			parts = append(parts, units.Bytes(float64(s.BandwidthBps))+"/s")
		}
	case spec.StorageNAS:
		parts = append(parts, "nas served from "+s.Site+" (sftp-server; sshfs in the node's site)")
	}
	return strings.Join(parts, ", ")
}
