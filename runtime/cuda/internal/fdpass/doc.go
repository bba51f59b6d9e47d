// Package fdpass passes POSIX file descriptors (the exported CUDA memory
// handles of runtime/cuda) between the ranks' processes of a job on one
// host, over Unix-domain SOCK_SEQPACKET sockets as SCM_RIGHTS ancillary
// data.
//
// Each rank Listens on a socket of its own in $TMPDIR/hir-<uid>/ (a
// random name per process), publishes its Path (through the job's store),
// and Connects to every peer's path, introducing itself with the job
// token. An accepted connection must come from a process of our own uid
// (SO_PEERCRED) and prove the token in its first message, or it is
// dropped. Send passes a descriptor to a peer under a key; Recv waits for
// the one a peer sent under a key, failing at once if that peer's
// connection ends (its process died) and after a timeout otherwise. Close
// shuts every connection and closes the descriptors nobody took.
//
// The exchange is built on Unix only, and checks peer credentials on Linux
// only: on other Unix systems it refuses every connection.
package fdpass
