// Package weekly evaluates a weekly schedule (api/weekly/v1alpha1): the
// windows NSScaler sleeps in and RebootPolicy restarts in. Everything here
// is a pure function of the instant it is given; the controllers pass their
// injected clock's Now.
//
// # Wall-clock times and daylight saving
//
// A window's from and to are readings of the schedule zone's wall clock,
// and a reading stands for the first instant at which that clock shows it
// or a later time. For the common reading that happens once, that is the
// instant it happens. Around a daylight saving change it gives:
//
//   - A reading the clock skips (02:30 when Europe/Berlin jumps from 02:00
//     to 03:00) stands for the instant of the jump: a window that opens in
//     the skipped hour opens when the clock jumps, one that closes in it
//     closes then, and one lying wholly inside it does not happen that day.
//   - A reading the clock shows twice (02:30 when Berlin falls back from
//     03:00 to 02:00) stands for its first occurrence: a window opens and
//     closes at the first one, so it never opens twice in a night.
//
// An occurrence of a window is one interval [open, close) of real time;
// it lasts longer or shorter than its wall-clock length across a change
// (a night window 20:00–08:00 lasts 13 real hours on the night Berlin
// falls back, 11 on the night it springs forward).
package weekly
