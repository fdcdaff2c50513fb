// Command runner replays conformance/cases/** against a live topogate over
// HTTPS and prints pass/fail per case and a summary line "N passed, M failed".
//
// It starts topogate itself (--topogate BINARY) with a generated
// configuration: certificates from certs/, and for every snapshot case two
// push-enabled inventories fed by that case's TopologySource (and Node list),
// one read over a bearer token and one over mTLS. Then:
//   - topologysource / modeldeployment cases: the input wrapped in an
//     AdmissionReview v1 CREATE, POSTed to /validate/<plural>; verdict =
//     response.allowed, rules = the [RULE] prefixes of status.details.causes,
//     warnings = response.warnings.
//   - snapshot cases: PUT /snapshots/<inventory> with the writer credential.
//     Valid: 200/201, then GET returns the same revision and nodes (JSON and
//     YAML), and the consumer-faithful reader accepts it over bearer and mTLS.
//     Invalid: 422 with the expected rules, and nothing is served afterwards.
//
// case.yaml: kind (topologysource|modeldeployment|snapshot), input (object,
// raw text, or a file name next to case.yaml), source (TopologySource or its
// spec, for snapshots), nodes (NodeList, list of Nodes, or name -> labels),
// operation (default CREATE), expect {verdict, rules, warnings}.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

func main() {
	var (
		casesDir = flag.String("cases", "conformance/cases", "case corpus root")
		binary   = flag.String("topogate", os.Getenv("TOPOGATE_BINARY"), "topogate binary to start")
		certsDir = flag.String("certs", "certs", "folder with make-ca.sh, make-server-cert.sh, make-client-cert.sh")
		filter   = flag.String("run", "", "only cases whose id matches this regular expression")
		keep     = flag.Bool("keep", false, "keep the work folder (configuration, logs)")
		verbose  = flag.Bool("v", false, "print passing cases too")
	)
	flag.Parse()
	if *binary == "" {
		fatal("--topogate (or TOPOGATE_BINARY) is required")
	}
	start := time.Now()
	cases, err := loadCases(*casesDir, *filter)
	if err != nil {
		fatal(err.Error())
	}
	if len(cases) == 0 {
		fatal("no cases found under " + *casesDir)
	}
	work, err := os.MkdirTemp("", "topogate-conformance-")
	if err != nil {
		fatal(err.Error())
	}
	if !*keep {
		// os.Exit skips deferred calls, so every exit path runs this.
		cleanupWork = func() { _ = os.RemoveAll(work) }
		defer cleanupWork()
	} else {
		fmt.Println("work folder:", work)
	}
	env, err := setup(work, *certsDir, cases)
	if err != nil {
		fatal(err.Error())
	}
	srv, err := startTopogate(*binary, env)
	if err != nil {
		fatal(err.Error())
	}
	passed, failed := 0, 0
	for _, c := range cases {
		var err error
		if c.err != nil {
			err = c.err
		} else {
			switch c.file.Kind {
			case "topologysource", "modeldeployment":
				err = runAdmission(env, c)
			case "snapshot":
				err = runSnapshot(env, c)
			case "nodelabels":
				err = runNodeLabels(*binary, c)
			default:
				err = fmt.Errorf("unknown kind %q", c.file.Kind)
			}
		}
		if err != nil {
			failed++
			fmt.Printf("FAIL %s: %v\n", c.id, err)
		} else {
			passed++
			if *verbose {
				fmt.Printf("PASS %s\n", c.id)
			}
		}
	}
	stopErr := srv.stop()
	if stopErr != nil {
		fmt.Println("topogate:", stopErr)
		failed++
	}
	fmt.Printf("%d passed, %d failed (%s, %d cases, %.1f s)\n", passed, failed, filepath.Base(*binary),
		len(cases), time.Since(start).Seconds())
	if failed > 0 {
		if *keep {
			fmt.Println("topogate log:", srv.logPath)
		} else {
			fmt.Println("rerun with --keep to inspect the generated configuration and topogate's log")
		}
		cleanupWork()
		os.Exit(1)
	}
}

var cleanupWork = func() {}

func fatal(msg string) {
	fmt.Fprintln(os.Stderr, "runner:", msg)
	cleanupWork()
	os.Exit(2)
}
