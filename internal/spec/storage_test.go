package spec

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const storageBase = `[lab]
name = "st"
[site.db]
[site.mid]
[site.store]
[[link]]
sites = ["db", "mid"]
[[link]]
sites = ["mid", "store"]
[engine]
kind = "postgres"
`

func TestStorage(t *testing.T) {
	tests := []struct {
		name    string
		storage string // [storage.s] body
		want    Storage
	}{
		{"a san has a default size, a journal and no delay", `kind = "san"` + "\nsite = \"store\"",
			Storage{Name: "s", Kind: StorageSAN, Site: "store", SizeBytes: DefaultStorageSize, Journal: true}},
		{"a san takes size, delay in whole milliseconds and journal", `kind = "san"
site = "store"
size = "256MiB"
delay = "5ms"
journal = false`, Storage{Name: "s", Kind: StorageSAN, Site: "store", SizeBytes: 256 << 20, Delay: 5 * time.Millisecond}},
		{"a san takes I/O limits", `kind = "san"
site = "store"
iops = 200
bandwidth = "20MiB/s"`, Storage{Name: "s", Kind: StorageSAN, Site: "store", SizeBytes: DefaultStorageSize, Journal: true, IOPS: 200, BandwidthBps: 20 << 20}},
		{"memory has a default size", `kind = "memory"`, Storage{Name: "s", Kind: StorageMemory, SizeBytes: DefaultStorageSize}},
		{"memory takes a size", `kind = "memory"` + "\nsize = \"128MiB\"", Storage{Name: "s", Kind: StorageMemory, SizeBytes: 128 << 20}},
		{"a nas has a site and no size", `kind = "nas"` + "\nsite = \"store\"", Storage{Name: "s", Kind: StorageNAS, Site: "store"}},
		{"local is the data directory", `kind = "local"`, Storage{Name: "s", Kind: StorageLocal}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := storageBase + "[storage.s]\n" + tc.storage + "\n[node.p]\nsite = \"db\"\nrole = \"primary\"\nstorage = \"s\"\n[node.q]\nsite = \"db\"\nrole = \"primary\"\n"
			s, err := Parse("st.toml", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			got := *s.StorageOf("p")
			tc.want.Line = got.Line
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if s.StorageOf("q") != nil {
				t.Errorf("a node without storage has %+v", s.StorageOf("q"))
			}
		})
	}
}

func TestStorageErrors(t *testing.T) {
	tests := []struct {
		name, storage, node, want string
	}{
		{"a kind is required", `site = "store"`, "", `st.toml:15: storage.s: kind is required`},
		{"memory has no site", `kind = "memory"` + "\nsite = \"store\"", "", `storage.s.site: has no meaning for kind = "memory"`},
		{"a nas has no size", `kind = "nas"` + "\nsite = \"store\"\nsize = \"1GiB\"", "", `storage.s.size: has no meaning for kind = "nas"`},
		{"a delay is whole milliseconds", `kind = "san"` + "\nsite = \"store\"\ndelay = \"500us\"", "", `storage.s.delay = "500us": want whole milliseconds`},
		{"a delay has a unit", `kind = "san"` + "\nsite = \"store\"\ndelay = \"5\"", "", `storage.s.delay = "5": missing unit`},
		{"a size has a unit", `kind = "memory"` + "\nsize = \"100\"", "", `storage.s.size = "100": missing unit`},
		{"a node names a defined storage", `kind = "memory"`, `storage = "t"`, `node.p.storage: unknown storage "t"; defined storages: s`},
		{"storage is a string", `kind = "memory"`, `storage = 1`, `node.p.storage = 1: want a storage name`},
		{"a bandwidth is per second", `kind = "san"` + "\nsite = \"store\"\nbandwidth = \"10MB\"", "", `storage.s.bandwidth = "10MB": want a size per second, like "50MB/s"`},
		{"a bandwidth is in bytes", `kind = "san"` + "\nsite = \"store\"\nbandwidth = \"10mbit/s\"", "", `storage.s.bandwidth = "10mbit/s": sizes are in bytes, not bits`},
		{"iops is a positive integer", `kind = "san"` + "\nsite = \"store\"\niops = 0", "", `storage.s.iops = 0: want operations per second between 1 and 10000000`},
		{"iops is for a block device", `kind = "memory"` + "\niops = 100", "", `storage.s.iops: has no meaning for kind = "memory"; only a san is a block device here`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := storageBase + "\n\n\n[storage.s]\n" + tc.storage + "\n[node.p]\nsite = \"db\"\nrole = \"primary\"\n" + tc.node + "\n"
			_, err := Parse("st.toml", []byte(text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant it to contain %s", err, tc.want)
			}
		})
	}
}

func TestStorageAcrossSites(t *testing.T) {
	// db reaches store through mid: two links, one chain.
	text := storageBase + "[storage.s]\nkind = \"nas\"\nsite = \"store\"\n[node.p]\nsite = \"db\"\nrole = \"primary\"\nstorage = \"s\"\n"
	if _, err := Parse("st.toml", []byte(text)); err != nil {
		t.Fatal(err)
	}
}
