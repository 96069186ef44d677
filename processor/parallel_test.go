package processor_test

import (
	"flag"
	"strconv"
)

// testParallel is how many of this package's tests marked t.Parallel run
// at once when the command line does not say (-parallel). go test's
// default is GOMAXPROCS, 2 on the CI machine, but these tests mostly wait:
// on the broker (commits, rebalances, session timeouts) and on timeouts of
// their own. Serially they used about a third of one core. Four at a time
// keeps CPU headroom on 2 cores for the tests that measure latency, which
// stay serial (run before the parallel ones) anyway.
const testParallel = 4

// defaultParallel sets -test.parallel to testParallel unless it was given.
// It runs in TestMain before m.Run, which reads the flag.
func defaultParallel() {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(testParallel))
	}
}
