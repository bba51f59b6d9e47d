package launch

import "fmt"

// Place is this process's rank among the processes a launcher started,
// and the variables that said so. It is all a backend that runs every
// rank of a program in one process (sim) needs to know of a job: whether
// it is the process that runs the program.
type Place struct {
	Rank, WorldSize   int
	RankVar, WorldVar string // e.g. "RANK" and "WORLD_SIZE"
}

func (p Place) String() string {
	return fmt.Sprintf("%s=%d of %s=%d", p.RankVar, p.Rank, p.WorldVar, p.WorldSize)
}

// placeVars are the launchers' rank and size variables, the first pair
// with either set winning (FromEnv's order, then MPI's).
var placeVars = [][2]string{
	{EnvRank, EnvWorldSize},                          // hirrun, torchrun, by hand
	{envSlurmProcID, envSlurmNTasks},                 // srun
	{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, // Open MPI's mpirun
	{"PMI_RANK", "PMI_SIZE"},                         // MPICH's and Intel MPI's mpirun
}

// PlaceFromEnv reads this process's place in a job from torchrun's, srun's
// or mpirun's variables. Unlike FromEnv it needs no store address: ok is
// false, with no error, when none is set; a pair set in part, a value that
// is not a number or a rank out of range is an error naming the variable.
func PlaceFromEnv(look func(string) (string, bool)) (p Place, ok bool, err error) {
	for _, vars := range placeVars {
		_, hasRank := look(vars[0])
		_, hasWorld := look(vars[1])
		if !hasRank && !hasWorld {
			continue
		}
		p = Place{RankVar: vars[0], WorldVar: vars[1]}
		if p.Rank, err = requiredInt(look, vars[0], vars[1]); err != nil {
			return Place{}, false, fmt.Errorf("launch: %w", err)
		}
		if p.WorldSize, err = requiredInt(look, vars[1], vars[0]); err != nil {
			return Place{}, false, fmt.Errorf("launch: %w", err)
		}
		if p.WorldSize < 1 || p.Rank >= p.WorldSize {
			return Place{}, false, fmt.Errorf("launch: %s=%d is out of range for %s=%d", vars[0], p.Rank, vars[1], p.WorldSize)
		}
		return p, true, nil
	}
	return Place{}, false, nil
}
