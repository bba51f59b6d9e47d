package passes

import "testing"

// Check runs the passes that reject, in pipeline order: the first five.
func TestCheckRunsTheRejectingPasses(t *testing.T) {
	var names []string
	for _, p := range checkPipeline {
		names = append(names, p.Name)
	}
	want := []string{"typecheck", "validate", "symmetric", "stream-parallel", "deadlock", "stream-hazards"}
	if len(names) != len(want) {
		t.Fatalf("Check runs %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] || Pipeline()[i].Name != want[i] {
			t.Fatalf("Check runs %v, want %v (the first passes of the pipeline)", names, want)
		}
	}
}
