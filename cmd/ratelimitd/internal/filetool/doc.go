// Package filetool implements ratelimitd's file tools, for operators: a
// summary of a limiter's file (Inspect), a consistency check (Verify),
// its buckets as JSON lines (Dump) and the library's salvage of a
// damaged file (Salvage). None of them opens the file with bbolt, so
// none trusts its pages, and all refuse a file a limiter has open (back
// a live file up through the admin API instead).
package filetool
