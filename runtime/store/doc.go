// Package store is the rendezvous key-value store the ranks of a job meet
// through: one process serves it over TCP (the launcher, or rank 0 when the
// job was started by torchrun or srun) and every rank is a client.
//
// A client can set, get (waiting for a key to appear), wait for keys, add
// to a counter, delete, and meet the other ranks at a named barrier.
// ExchangeAll builds an all-gather of small byte strings on top. Every wait
// has a timeout, and a timed-out wait names what it was waiting for: the
// keys, or the ranks that did not arrive. A rank whose connection closes
// (its process died) makes the barriers waiting for it fail at once.
//
// Every connection first proves the job's token; a client with the wrong
// token is refused ("store at 127.0.0.1:29500 rejected the job token") and
// the server logs and counts it. The server listens on loopback unless told
// otherwise. The wire protocol is described in protocol.go.
package store
