"""graphcmp's library: records, readers, matching, metrics, verdicts and reports. No CLI, no web app."""
