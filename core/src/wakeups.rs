//! Who waits on what, and what wakes them: the registry of waiting channels,
//! the one place that decides whom a release or handoff message wakes
//! (`registry`), and the pub/sub feeds that hear those messages (`feed`).

pub(crate) mod feed;
pub(crate) mod registry;
