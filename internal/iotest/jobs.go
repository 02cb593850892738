package iotest

import (
	"fmt"
	"strconv"
	"strings"
)

// The jobs, run one after another (stonewall) on one shared file, one
// request in flight (psync: pread/pwrite, as a database backend does):
//
//	randread-<bs>   random reads, each block size of Options.BlockSizes
//	randwrite-<bs>  random writes, each block size (no sync: the device's own speed)
//	seqread         sequential 1 MiB reads
//	seqwrite        sequential 1 MiB writes
//	syncwrite-8k    sequential 8 KiB writes, file opened O_SYNC (sync=1):
//	                each write returns once it is on stable storage, as a
//	                commit's WAL/redo flush; its completion latency is the
//	                whole flush, so fio's percentiles are the figure (with
//	                fsync=1 fio reports the write and the fsync separately,
//	                and percentiles of two parts do not add up)

// Job kinds, the first part of fio job names.
const (
	jobRandRead  = "randread"
	jobRandWrite = "randwrite"
	jobSeqRead   = "seqread"
	jobSeqWrite  = "seqwrite"
	jobSyncWrite = "syncwrite"
)

// JobName is the fio job name of a kind at a block size ("randread-4k").
func JobName(kind string, blockBytes int) string {
	return kind + "-" + sizeText(blockBytes)
}

// Args is fio's command line for a profile of dir: global options, then
// one --name section per job.
func Args(dir string, opt Options, direct bool) []string {
	opt = opt.withDefaults()
	d := "0"
	if direct {
		d = "1"
	}
	args := []string{
		"--output-format=json",
		"--directory=" + dir,
		"--filename=" + FileName,
		"--size=" + strconv.FormatInt(opt.FileSizeBytes, 10),
		"--runtime=" + strconv.FormatInt(max(opt.Runtime.Milliseconds(), 1), 10) + "ms",
		"--time_based",
		"--ioengine=psync",
		"--iodepth=1",
		"--numjobs=1",
		"--direct=" + d,
		"--thread",       // one process: an interrupt or a kill stops every job
		"--randrepeat=0", // a fresh random sequence each time
		"--percentile_list=50:99",
	}
	job := func(name, rw string, bs int, extra ...string) {
		args = append(args, "--name="+name, "--rw="+rw, "--bs="+strconv.Itoa(bs), "--stonewall")
		args = append(args, extra...)
	}
	for _, bs := range opt.BlockSizes {
		job(JobName(jobRandRead, bs), "randread", bs)
	}
	for _, bs := range opt.BlockSizes {
		job(JobName(jobRandWrite, bs), "randwrite", bs)
	}
	job(jobSeqRead, "read", SeqBlockBytes)
	job(jobSeqWrite, "write", SeqBlockBytes)
	job(JobName(jobSyncWrite, SyncBlockBytes), "write", SyncBlockBytes, "--sync=1")
	return args
}

// sizeText writes a block size the way fio's job names here do: 4k, 16k, 1m, 512.
func sizeText(b int) string {
	switch {
	case b%(1<<20) == 0:
		return strconv.Itoa(b>>20) + "m"
	case b%(1<<10) == 0:
		return strconv.Itoa(b>>10) + "k"
	}
	return strconv.Itoa(b)
}

// parseSize reads sizeText's form back.
func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1<<10, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		mult, s = 1<<20, strings.TrimSuffix(s, "m")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("block size %q", s)
	}
	return n * mult, nil
}
