package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tidemark-streams/tidemark/processor"
)

// chromiumHint says how to get the browser the web view test drives.
const chromiumHint = "the web view test drives a headless chromium: install it with " +
	"`apt-get install -y chromium` (make test does), or point TIDEMARK_CHROMIUM at a Chrome or Chromium binary"

// findChromium returns the browser the web view test drives: TIDEMARK_CHROMIUM,
// else /usr/bin/chromium (Debian's), else one on PATH.
func findChromium() (string, error) {
	if p := os.Getenv("TIDEMARK_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("TIDEMARK_CHROMIUM=%s: %w", p, err)
		}
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium", nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium found")
}

// uiState is what the page shows, read from its DOM.
type uiState struct {
	Title    string         `json:"title"`
	Heading  string         `json:"heading"`
	Points   map[string]int `json:"points"`
	Newest   map[string]int `json:"newest"`
	Rows     int            `json:"rows"`
	Offsets  int            `json:"offsets"`
	Subs     int            `json:"subs"`
	Nodes    int            `json:"nodes"`
	Status   string         `json:"status"`
	StatusOK bool           `json:"status_ok"`
}

const readUIState = `(() => {
  const points = {}, newest = {};
  document.querySelectorAll("svg.chart").forEach(s => {
    points[s.id] = parseInt(s.getAttribute("data-points") || "0", 10);
    newest[s.id] = parseInt(s.getAttribute("data-newest") || "0", 10);
  });
  const rows = [...document.querySelectorAll("#frontier tbody tr")];
  const status = document.getElementById("status");
  return {
    title: document.title,
    heading: document.querySelector("header h1").textContent,
    points, newest,
    rows: rows.length,
    offsets: rows.filter(r => /^\d+$/.test(r.children[2].textContent)).length,
    subs: document.querySelectorAll("svg#topology g.subtopology").length,
    nodes: document.querySelectorAll("svg#topology g.subtopology g.node").length,
    status: status.textContent,
    status_ok: !status.classList.contains("bad"),
  };
})()`

// The web view in a real headless browser, on the demo's pipelines and
// embedded broker: the page loads, every chart draws and keeps drawing
// newer samples, the frontier table shows committed offsets, the topology
// has one box per sub-topology, and the page logs no errors or exceptions.
// TIDEMARK_UI_SCREENSHOT=docs/ui.png (from the repository root when
// relative) writes a full-page screenshot after half a minute of traffic.
func TestWebViewInHeadlessBrowser(t *testing.T) {
	chromium, err := findChromium()
	if err != nil {
		if os.Getenv("TIDEMARK_REQUIRE_BROWSER") == "1" {
			t.Fatalf("%v; %s", err, chromiumHint)
		}
		t.Skipf("%v; %s", err, chromiumHint)
	}
	shot := os.Getenv("TIDEMARK_UI_SCREENSHOT")
	if shot != "" && !filepath.IsAbs(shot) {
		shot = filepath.Join("..", "..", shot) // go test runs in cmd/tidemark
	}

	appc := make(chan *processor.App, 1)
	var demoErr bytes.Buffer
	f := demoFlags{rate: 500, seed: 1, partitions: 2, httpAddr: "127.0.0.1:0", app: "ui-test", threshold: 20,
		disorder: 2 * time.Second, stateDir: t.TempDir(), onApp: func(a *processor.App) { appc <- a }}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	demoCtx, stopDemo := context.WithCancel(ctx)
	done := make(chan error, 1)
	var mu sync.Mutex // demoErr is written by the demo's goroutines
	go func() { done <- runDemo(demoCtx, io.Discard, lockedWriter{&mu, &demoErr}, f) }()
	defer func() {
		stopDemo()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("demo: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("demo did not stop within 30s of cancel")
		}
	}()
	var app *processor.App
	select {
	case app = <-appc:
	case err := <-done:
		t.Fatalf("demo ended before it ran: %v", err)
	}
	var addr string
	for deadline := time.Now().Add(30 * time.Second); addr == ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("the app's HTTP server did not start in 30s; demo stderr:\n%s", demoErr.String())
		}
		addr = app.HTTPAddr()
	}
	url := "http://" + addr + "/ui"

	// Chromium with nothing that reaches for the network by itself: the
	// test machine may have none.
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()

	// Every console error, uncaught exception and browser log error of
	// the page (a failed request included) fails the test.
	var pmu sync.Mutex
	var problems []string
	consoleCtx, stopConsole := context.WithCancel(bctx)
	consoleDone := make(chan struct{})
	messages := chromedp.Console(consoleCtx)
	go func() {
		defer close(consoleDone)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				pmu.Lock()
				problems = append(problems, m.String()+" at "+m.URL)
				pmu.Unlock()
			}
		}
	}()
	defer func() { stopConsole(); <-consoleDone }()
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1400, 1000), chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.ID("chart-staleness"))); err != nil {
		t.Fatalf("load %s in %s: %v", url, chromium, err)
	}
	read := func() uiState {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[uiState](readUIState))
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		return s
	}
	full := func(s uiState) bool {
		if s.Offsets == 0 || s.Subs == 0 || len(s.Points) == 0 {
			return false
		}
		for _, n := range s.Points {
			if n < 2 {
				return false
			}
		}
		return true
	}
	var first uiState
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		first = read()
		if full(first) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90s the page still lacks data: %+v", first)
		}
	}
	t.Logf("page: %+v", first)
	wantCharts := []string{"chart-staleness", "chart-interval", "chart-rate", "chart-lag", "chart-commits", "chart-restore"}
	// The page polls once a second; on a loaded machine a poll and its
	// drawing can take longer, so wait (up to 30 s) for every chart to
	// draw a newer sample.
	advanced := func(s uiState) bool {
		for _, id := range wantCharts {
			if s.Newest[id] <= first.Newest[id] {
				return false
			}
		}
		return true
	}
	var second uiState
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if second = read(); advanced(second) || time.Now().After(deadline) {
			break
		}
	}

	if !strings.HasPrefix(second.Title, "tidemark — ui-test") || !strings.HasPrefix(second.Heading, "tidemark — ui-test") {
		t.Errorf("title %q, heading %q: want both to name the application ui-test", second.Title, second.Heading)
	}
	if !second.StatusOK {
		t.Errorf("the page reports a problem: %q", second.Status)
	}
	for _, id := range wantCharts {
		if second.Points[id] < 2 {
			t.Errorf("%s drew %d points, want at least 2", id, second.Points[id])
		}
		if second.Newest[id] <= first.Newest[id] {
			t.Errorf("%s: newest sample at %d ms, %d ms when first read: the chart did not advance in 30 s", id, second.Newest[id], first.Newest[id])
		}
	}
	if len(second.Points) != len(wantCharts) {
		t.Errorf("charts %v, want %v", second.Points, wantCharts)
	}
	var topo struct {
		SubTopologies []struct {
			Nodes []json.RawMessage `json:"nodes"`
		} `json:"sub_topologies"`
	}
	getJSON(t, "http://"+addr+"/ui/api/topology", &topo)
	nodes := 0
	for _, st := range topo.SubTopologies {
		nodes += len(st.Nodes)
	}
	if second.Subs != len(topo.SubTopologies) || second.Nodes != nodes || nodes == 0 {
		t.Errorf("the topology drawing has %d sub-topology groups and %d nodes; /ui/api/topology has %d and %d",
			second.Subs, second.Nodes, len(topo.SubTopologies), nodes)
	}
	var fr struct {
		Sinks []struct {
			Partitions []json.RawMessage `json:"partitions"`
		} `json:"sinks"`
	}
	getJSON(t, "http://"+addr+"/ui/api/frontier", &fr)
	rows := 0
	for _, s := range fr.Sinks {
		rows += max(len(s.Partitions), 1)
	}
	if second.Rows != rows || second.Offsets == 0 {
		t.Errorf("the frontier table has %d rows (%d with a committed offset); /ui/api/frontier has %d sink partitions", second.Rows, second.Offsets, rows)
	}

	if shot != "" {
		time.Sleep(25 * time.Second) // more history in the charts
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(shot, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", shot, len(png))
	}
	pmu.Lock()
	defer pmu.Unlock()
	for _, p := range problems {
		t.Errorf("browser: %s", p)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
