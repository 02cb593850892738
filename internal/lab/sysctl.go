package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// rootLedger records the root-namespace sysctls labs have changed, with
// the value before the first change and the labs that still need it.
// Labs overlap (tests run in parallel, users run several), so a change is
// undone only when the last lab holding it goes, and only if the value is
// still the one labs set. It lives outside any state root: the sysctls
// are the machine's.
const rootLedger = "/run/replab-sysctl.json"

type ledgerEntry struct {
	Original string   `json:"original"`
	Set      string   `json:"set"`
	Holders  []string `json:"holders"`
}

// withLedger runs fn on the ledger under an exclusive lock and saves it.
func withLedger(fn func(map[string]*ledgerEntry) error) error {
	lock, err := os.OpenFile(rootLedger+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("sysctl ledger: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock sysctl ledger: %w", err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	led := map[string]*ledgerEntry{}
	if b, err := os.ReadFile(rootLedger); err == nil {
		if err := json.Unmarshal(b, &led); err != nil {
			return fmt.Errorf("read %s: %w (remove it after checking the sysctls it lists)", rootLedger, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	ferr := fn(led)
	if len(led) == 0 {
		if err := os.Remove(rootLedger); err != nil && !errors.Is(err, os.ErrNotExist) {
			return errors.Join(ferr, err)
		}
		return ferr
	}
	b, _ := json.MarshalIndent(led, "", "  ")
	tmp := rootLedger + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return errors.Join(ferr, err)
	}
	return errors.Join(ferr, os.Rename(tmp, rootLedger))
}

// holdRootSysctl sets path to want(current) for lab and records it.
func holdRootSysctl(lab, path string, want func(cur string) string) error {
	return withLedger(func(led map[string]*ledgerEntry) error {
		cur, err := readProc(path)
		if err != nil {
			return err
		}
		val := want(cur)
		e := led[path]
		if e == nil {
			if val == cur {
				return nil // nothing to change, nothing to undo
			}
			e = &ledgerEntry{Original: cur}
			led[path] = e
		}
		if val != cur {
			if err := writeProc(path, val); err != nil {
				return err
			}
		}
		// The kernel may normalise the value (e.g. the order of a list).
		if e.Set, err = readProc(path); err != nil {
			return err
		}
		if !slices.Contains(e.Holders, lab) {
			e.Holders = append(e.Holders, lab)
		}
		return nil
	})
}

// releaseRootSysctls drops lab's holds, restoring each sysctl that no lab
// holds any more (if nobody changed it since). It returns what it restored.
func releaseRootSysctls(lab string) ([]string, error) {
	var done []string
	err := withLedger(func(led map[string]*ledgerEntry) error {
		var errs []error
		for path, e := range led {
			i := slices.Index(e.Holders, lab)
			if i < 0 {
				continue
			}
			e.Holders = slices.Delete(e.Holders, i, i+1)
			if len(e.Holders) > 0 {
				continue
			}
			delete(led, path)
			if cur, err := readProc(path); err != nil || cur != e.Set {
				continue // changed by someone else since: leave it
			}
			if err := writeProc(path, e.Original); err != nil {
				errs = append(errs, err)
				continue
			}
			done = append(done, fmt.Sprintf("sysctl %s restored to %q", procToSysctl(path), e.Original))
		}
		return errors.Join(errs...)
	})
	return done, err
}
