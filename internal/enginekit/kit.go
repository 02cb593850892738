// Package enginekit is the engines' toolkit: what the packages that
// implement package engine's contract share, and what the core borrows
// from them without knowing any engine. Server processes in a lab's sites
// (Proc, ProcNodes, the servers' OS user), waiting and fanning out (Poll,
// Each), blocking sockets for pollers, the lag probe's SQL stamps, the
// acknowledged-commits journal, the INSERT loader, and error-message
// pieces. It imports no database driver; package engine is the contract
// and imports nothing from here.
package enginekit
