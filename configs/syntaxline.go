package configs

import (
	"bytes"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// problemLine returns the line of a YAML syntax error in data, given the
// line yaml.v3 reported. yaml.v3 reports the line where the enclosing
// block began (its parser's context mark) rather than the line of the
// problem: a bad indentation on route 7 777 of 10 000 was reported at
// line 3, the first route. Every prefix of a block document cut at a line
// end parses until it reaches the problem, so the problem's line is the
// shortest prefix that fails, found by bisection from the reported line
// (log2(lines) parses, on the error path only). When the search finds no
// such line (the error needs the rest of the file), the reported line is
// kept.
func problemLine(data []byte, reported int) int {
	ends := lineEnds(data)
	fails := func(n int) bool { // the first n lines do not parse
		var doc yaml.Node
		return yaml.Unmarshal(data[:ends[n-1]], &doc) != nil
	}
	lo, hi := max(reported, 1), len(ends)
	if lo > hi || !fails(hi) {
		return reported
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// lineEnds returns, for each line of data, the offset just past it.
func lineEnds(data []byte) []int {
	var ends []int
	for off := 0; off < len(data); {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			ends = append(ends, len(data))
			break
		}
		off += i + 1
		ends = append(ends, off)
	}
	return ends
}

// syntaxLineFixed returns a decode error's text with the line of a syntax
// error ("yaml: line 3: did not find expected key") replaced by the
// problem's line (problemLine); other errors' text unchanged.
func syntaxLineFixed(data []byte, err error) string {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return err.Error()
	}
	reported, _ := strconv.Atoi(m[1])
	return "yaml: line " + strconv.Itoa(problemLine(data, reported)) + ": " + m[2]
}
