// Package launch starts the ranks of a job and tells each rank where it
// stands. Run starts N copies of a program on this machine with torchrun's
// variables and serves the job's store; FromEnv reads those variables back in
// a rank, whether hirrun, torchrun or srun started it; Join connects a rank
// to the job's store.
package launch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// The variables a launcher sets for each rank. RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT are torchrun's; the HIR_
// ones are ours.
const (
	EnvRank           = "RANK"
	EnvWorldSize      = "WORLD_SIZE"
	EnvLocalRank      = "LOCAL_RANK"
	EnvLocalWorldSize = "LOCAL_WORLD_SIZE"
	EnvMasterAddr     = "MASTER_ADDR"
	EnvMasterPort     = "MASTER_PORT"
	// EnvStoreToken is the job token every store client must present.
	EnvStoreToken = "HIR_STORE_TOKEN"
	// EnvStoreAddr overrides where the store is ("host:port").
	EnvStoreAddr = "HIR_STORE_ADDR"
	// EnvLaunched is "1" in ranks that Run started: the launcher serves the
	// store, so rank 0 must not.
	EnvLaunched = "HIR_LAUNCHED"
	// EnvNVLS is forced to 0 in every rank: NVLink multicast (NVLS) is not
	// used by hir and its setup fails on some machines.
	EnvNVLS = "NCCL_NVLS_ENABLE"

	envSlurmProcID   = "SLURM_PROCID"
	envSlurmNTasks   = "SLURM_NTASKS"
	envSlurmLocalID  = "SLURM_LOCALID"
	envSlurmTasksPN  = "SLURM_NTASKS_PER_NODE"
	envSlurmNNodes   = "SLURM_NNODES"
	envSlurmJobID    = "SLURM_JOB_ID"
	envSlurmStepID   = "SLURM_STEP_ID"
	envTorchRunID    = "TORCHELASTIC_RUN_ID"
	envTorchAgentUse = "TORCHELASTIC_USE_AGENT_STORE"
)

// Source says who started a rank.
type Source string

const (
	SourceHirrun   Source = "hirrun"   // launch.Run (hirrun --nproc)
	SourceTorchrun Source = "torchrun" // torchrun / torch.distributed.run
	SourceSlurm    Source = "srun"     // Slurm's srun, one task per rank
	SourceEnv      Source = "env"      // RANK and WORLD_SIZE set by hand
)

// Env is a rank's place in its job, read from the environment.
type Env struct {
	Source         Source
	Rank           int
	WorldSize      int
	LocalRank      int
	LocalWorldSize int // 0 when the launcher does not say
	MasterAddr     string
	MasterPort     int

	// StoreAddr is where the job's store listens ("host:port"):
	// HIR_STORE_ADDR if set; else MASTER_ADDR:MASTER_PORT when hirrun
	// launched the job (its launcher serves there); else
	// MASTER_ADDR:MASTER_PORT+1, because torchrun's own store (and any
	// torch.distributed code in the job) holds MASTER_PORT.
	StoreAddr string
	// ServeStore is true for the one rank that must serve the store: rank 0,
	// unless hirrun launched the job (then the launcher serves).
	ServeStore bool
	// Token is the job token. TokenDerived is true when HIR_STORE_TOKEN was
	// not set and the token was derived from the job's identity (Slurm job
	// id, torchrun run id, master address): that keeps ranks of different
	// jobs apart, but anyone who can see the job can compute it. Export
	// HIR_STORE_TOKEN for a secret one.
	Token        string
	TokenDerived bool
}

// FromEnv reads the rank's place in its job from the environment. ok is
// false, with no error, when no launcher variable is set (a single process).
// A variable that is set but malformed, or a partial set, is an error that
// names the variable.
func FromEnv() (env Env, ok bool, err error) {
	return fromLookup(LookupSet)
}

// LookupSet is os.LookupEnv for launcher variables: a variable set to the
// empty string counts as unset (shells and job scripts export RANK= and
// the like with nothing in them).
func LookupSet(name string) (string, bool) {
	v, ok := os.LookupEnv(name)
	return v, ok && v != ""
}

type lookupFunc func(string) (string, bool)

func fromLookup(look lookupFunc) (Env, bool, error) {
	get := func(name string) string { v, _ := look(name); return v }
	has := func(name string) bool { _, ok := look(name); return ok }

	var env Env
	var err error
	switch {
	case has(EnvRank) || has(EnvWorldSize):
		env, err = torchStyle(look)
	case has(envSlurmProcID):
		env, err = slurmStyle(look)
	default:
		if has(EnvLaunched) || has(EnvStoreToken) || has(EnvLocalRank) {
			return Env{}, false, fmt.Errorf("launch: %s is not set, but other launcher variables are", EnvRank)
		}
		return Env{}, false, nil
	}
	if err != nil {
		return Env{}, false, fmt.Errorf("launch: %w", err)
	}
	if err := env.resolveStore(look); err != nil {
		return Env{}, false, fmt.Errorf("launch: %w", err)
	}
	env.Token = get(EnvStoreToken)
	if env.Token == "" {
		if env.Source == SourceHirrun {
			return Env{}, false, fmt.Errorf("launch: %s is empty or not set in a rank that hirrun started", EnvStoreToken)
		}
		env.Token = derivedToken(look, env)
		env.TokenDerived = true
	}
	return env, true, nil
}

// torchStyle reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT (set by hirrun, torchrun or by hand).
func torchStyle(look lookupFunc) (Env, error) {
	env := Env{Source: SourceEnv}
	if v, _ := look(EnvLaunched); v == "1" {
		env.Source = SourceHirrun
	} else if _, ok := look(envTorchRunID); ok {
		env.Source = SourceTorchrun
	} else if _, ok := look(envTorchAgentUse); ok {
		env.Source = SourceTorchrun
	}
	var err error
	if env.Rank, err = requiredInt(look, EnvRank, EnvWorldSize); err != nil {
		return env, err
	}
	if env.WorldSize, err = requiredInt(look, EnvWorldSize, EnvRank); err != nil {
		return env, err
	}
	if env.LocalRank, err = optionalInt(look, EnvLocalRank, env.Rank); err != nil {
		return env, err
	}
	if env.LocalWorldSize, err = optionalInt(look, EnvLocalWorldSize, 0); err != nil {
		return env, err
	}
	if err := env.check(EnvRank, EnvWorldSize, EnvLocalRank, EnvLocalWorldSize); err != nil {
		return env, err
	}
	env.MasterAddr, _ = look(EnvMasterAddr)
	if env.MasterAddr == "" {
		return env, fmt.Errorf("%s is not set (RANK is %d of %d)", EnvMasterAddr, env.Rank, env.WorldSize)
	}
	if _, ok := look(EnvMasterPort); !ok {
		return env, fmt.Errorf("%s is not set (RANK is %d of %d)", EnvMasterPort, env.Rank, env.WorldSize)
	}
	if env.MasterPort, err = port(look, EnvMasterPort); err != nil {
		return env, err
	}
	return env, nil
}

// slurmStyle reads srun's variables. MASTER_ADDR defaults to loopback on a
// one-node job; MASTER_PORT defaults to a port derived from the job id so
// two jobs on one node do not collide.
func slurmStyle(look lookupFunc) (Env, error) {
	env := Env{Source: SourceSlurm}
	var err error
	if env.Rank, err = requiredInt(look, envSlurmProcID, envSlurmNTasks); err != nil {
		return env, err
	}
	if env.WorldSize, err = requiredInt(look, envSlurmNTasks, envSlurmProcID); err != nil {
		return env, err
	}
	if env.LocalRank, err = optionalInt(look, envSlurmLocalID, env.Rank); err != nil {
		return env, err
	}
	// SLURM_NTASKS_PER_NODE is a plain count only when it is uniform.
	if v, ok := look(envSlurmTasksPN); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			env.LocalWorldSize = n
		}
	}
	if err := env.check(envSlurmProcID, envSlurmNTasks, envSlurmLocalID, envSlurmTasksPN); err != nil {
		return env, err
	}
	env.MasterAddr, _ = look(EnvMasterAddr)
	if env.MasterAddr == "" {
		nodes, err := optionalInt(look, envSlurmNNodes, 1)
		if err != nil {
			return env, err
		}
		if nodes > 1 {
			return env, fmt.Errorf("%s is not set, and this srun job spans %d nodes: set it to the first node's host name, e.g. MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)", EnvMasterAddr, nodes)
		}
		env.MasterAddr = "127.0.0.1"
	}
	if _, ok := look(EnvMasterPort); ok {
		if env.MasterPort, err = port(look, EnvMasterPort); err != nil {
			return env, err
		}
	} else {
		job, ok := look(envSlurmJobID)
		id, err := strconv.ParseUint(job, 10, 64)
		if !ok || err != nil {
			return env, fmt.Errorf("%s is not set, and there is no %s to derive one from", EnvMasterPort, envSlurmJobID)
		}
		env.MasterPort = 20000 + int(id%20000)
	}
	return env, nil
}

// check validates the numbers; the names are the variables they came from.
func (e *Env) check(rankVar, worldVar, localVar, localWorldVar string) error {
	if e.WorldSize < 1 {
		return fmt.Errorf("%s=%d: the world size must be at least 1", worldVar, e.WorldSize)
	}
	if e.Rank >= e.WorldSize {
		return fmt.Errorf("%s=%d is out of range for %s=%d", rankVar, e.Rank, worldVar, e.WorldSize)
	}
	if e.LocalWorldSize > e.WorldSize {
		return fmt.Errorf("%s=%d is larger than %s=%d", localWorldVar, e.LocalWorldSize, worldVar, e.WorldSize)
	}
	if e.LocalRank >= e.WorldSize || (e.LocalWorldSize > 0 && e.LocalRank >= e.LocalWorldSize) {
		return fmt.Errorf("%s=%d is out of range for this node's ranks", localVar, e.LocalRank)
	}
	return nil
}

// resolveStore fills in StoreAddr and ServeStore.
func (e *Env) resolveStore(look lookupFunc) error {
	e.ServeStore = e.Rank == 0 && e.Source != SourceHirrun
	if addr, ok := look(EnvStoreAddr); ok {
		if _, p, err := net.SplitHostPort(addr); err != nil || p == "" {
			return fmt.Errorf("%s=%q is not host:port", EnvStoreAddr, addr)
		}
		e.StoreAddr = addr
		return nil
	}
	p := e.MasterPort
	if e.Source != SourceHirrun {
		if p == 65535 {
			return fmt.Errorf("%s=65535 leaves no port for the store (it uses %s+1); set %s", EnvMasterPort, EnvMasterPort, EnvStoreAddr)
		}
		p++
	}
	e.StoreAddr = net.JoinHostPort(e.MasterAddr, strconv.Itoa(p))
	return nil
}

// derivedToken is the same in every rank of a job and differs between jobs.
func derivedToken(look lookupFunc, e Env) string {
	h := sha256.New()
	fmt.Fprintf(h, "hir store token\x00%s\x00%s\x00%d\x00%d", e.Source, e.MasterAddr, e.MasterPort, e.WorldSize)
	for _, name := range []string{envSlurmJobID, envSlurmStepID, envTorchRunID} {
		v, _ := look(name)
		fmt.Fprintf(h, "\x00%s=%s", name, v)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// requiredInt reads a non-negative integer that must be set because its
// partner is.
func requiredInt(look lookupFunc, name, partner string) (int, error) {
	v, ok := look(name)
	if !ok {
		return 0, fmt.Errorf("%s is set but %s is not", partner, name)
	}
	return parseNonNegative(name, v)
}

func optionalInt(look lookupFunc, name string, def int) (int, error) {
	v, ok := look(name)
	if !ok {
		return def, nil
	}
	return parseNonNegative(name, v)
}

func parseNonNegative(name, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || strings.HasPrefix(v, "+") {
		return 0, fmt.Errorf("%s=%q is not a non-negative integer", name, v)
	}
	return n, nil
}

func port(look lookupFunc, name string) (int, error) {
	v, _ := look(name)
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 || strings.HasPrefix(v, "+") {
		return 0, fmt.Errorf("%s=%q is not a TCP port (1 to 65535)", name, v)
	}
	return n, nil
}
