-- Whose turn the schedule's consolidation pass is: when a replica last
-- began it. A replica runs the scheduled pass only when it moves this
-- time forward past a full interval, so replicas run one pass between
-- them per interval.

CREATE TABLE engram_passes (
    name       text PRIMARY KEY,
    started_at timestamptz NOT NULL
);
