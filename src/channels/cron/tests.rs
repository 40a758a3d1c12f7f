//! Tests of the cron channel over a fake clock: claims, restarts, missed runs, races.
