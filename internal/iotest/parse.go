package iotest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// fio's JSON output (--output-format=json), the parts read here.
type fioOutput struct {
	Version string   `json:"fio version"`
	Jobs    []fioJob `json:"jobs"`
}

type fioJob struct {
	Name  string `json:"jobname"`
	Error int    `json:"error"`
	Read  fioDir `json:"read"`
	Write fioDir `json:"write"`
}

type fioDir struct {
	IOBytes  int64   `json:"io_bytes"`
	BWBytes  float64 `json:"bw_bytes"` // bytes per second
	IOPS     float64 `json:"iops"`
	TotalIOs int64   `json:"total_ios"`
	Clat     struct {
		Percentile map[string]float64 `json:"percentile"` // "50.000000" -> ns
	} `json:"clat_ns"`
}

// Parse reads fio's JSON output of the jobs Args lists into a Result
// (figures only: Profile adds where and how it measured). Anything before
// the JSON object (fio prints some notes there) is skipped.
func Parse(out []byte) (*Result, error) {
	i := bytes.IndexByte(out, '{')
	if i < 0 {
		return nil, errors.New("no JSON in fio's output")
	}
	var fo fioOutput
	if err := json.Unmarshal(out[i:], &fo); err != nil {
		return nil, fmt.Errorf("read fio's JSON output: %w", err)
	}
	r := &Result{FioVersion: fo.Version}
	var seen []string
	for _, j := range fo.Jobs {
		if j.Error != 0 {
			return nil, fmt.Errorf("fio job %s failed with error %d", j.Name, j.Error)
		}
		kind, size, _ := strings.Cut(j.Name, "-")
		var err error
		switch kind {
		case jobRandRead, jobRandWrite:
			var bs int
			if bs, err = parseSize(size); err != nil {
				return nil, fmt.Errorf("fio job %s: %w", j.Name, err)
			}
			if kind == jobRandRead {
				err = positive(j.Name, j.Read.IOPS)
				r.RandRead = append(r.RandRead, BlockIOPS{BlockBytes: bs, IOPS: j.Read.IOPS})
			} else {
				err = positive(j.Name, j.Write.IOPS)
				r.RandWrite = append(r.RandWrite, BlockIOPS{BlockBytes: bs, IOPS: j.Write.IOPS})
			}
		case jobSeqRead:
			err = positive(j.Name, j.Read.BWBytes)
			r.SeqReadMBPerS = j.Read.BWBytes / 1e6
		case jobSeqWrite:
			err = positive(j.Name, j.Write.BWBytes)
			r.SeqWriteMBPerS = j.Write.BWBytes / 1e6
		case jobSyncWrite:
			if err = positive(j.Name, j.Write.IOPS); err != nil {
				break
			}
			r.SyncWrite.IOPS = j.Write.IOPS
			if r.SyncWrite.P50Ms, err = percentileMs(j, j.Write, 50); err != nil {
				break
			}
			r.SyncWrite.P99Ms, err = percentileMs(j, j.Write, 99)
		default:
			continue // not one of ours
		}
		if err != nil {
			return nil, err
		}
		seen = append(seen, kind)
	}
	for _, k := range []string{jobRandRead, jobRandWrite, jobSeqRead, jobSeqWrite, jobSyncWrite} {
		if !slices.Contains(seen, k) {
			return nil, fmt.Errorf("fio's output has no %s job", k)
		}
	}
	sortBlocks(r.RandRead)
	sortBlocks(r.RandWrite)
	return r, nil
}

func positive(job string, v float64) error {
	if v > 0 {
		return nil
	}
	return fmt.Errorf("fio job %s did no I/O", job)
}

// percentileMs is fio's completion-latency percentile p of a job, in ms.
func percentileMs(j fioJob, d fioDir, p float64) (float64, error) {
	if ns, ok := d.Clat.Percentile[fmt.Sprintf("%f", p)]; ok {
		return ns / 1e6, nil
	}
	return 0, fmt.Errorf("fio job %s: no p%g completion latency (fio's percentile_list must list it)", j.Name, p)
}

func sortBlocks(b []BlockIOPS) {
	sort.Slice(b, func(i, j int) bool { return b[i].BlockBytes < b[j].BlockBytes })
}
