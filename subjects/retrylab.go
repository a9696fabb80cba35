package subjects

// classifyClient maps the client package's errors; see Classify.
func classifyClient(err error) (result string, status, attempts int, ok bool) {
	return "", 0, 0, false
}
