//! The budget tree ([`GroupStore`]): one record per group.

use serde::{Deserialize, Serialize};
use switchyard_governance::{Budget, Limits};

use crate::StoreFuture;

/// A group: one bucket of the budget tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupRecord {
    /// Unique name.
    pub name: String,
    /// The group above it.
    pub parent: Option<String>,
    /// Its spending cap.
    pub budget: Option<Budget>,
    /// Its rate and concurrency limits.
    #[serde(default)]
    pub limits: Limits,
    /// What its requests keep of their text (`none`, `redacted`, `full`;
    /// unset: as its parent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<String>,
    /// Each end user's budget and limits inside the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_users: Option<switchyard_governance::key::EndUserPolicy>,
    /// What its requests are charged above their cost (unset: as its
    /// parent's; none anywhere up: their cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub markup: Option<switchyard_governance::card::Markup>,
    /// Its own rate card (chargeback): what its requests on the lanes it
    /// names are charged, each entry as a `rate_card` entry is written
    /// (checked when written, read back when groups load), by lane name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub rate_card: std::collections::BTreeMap<String, serde_json::Value>,
    /// Declared in the config file (changed there, not over the API).
    #[serde(default)]
    pub from_config: bool,
    /// When it was created (Unix seconds).
    pub created_at: i64,
}

/// The budget tree.
pub trait GroupStore: Send + Sync {
    /// Creates or replaces a group.
    fn put_group(&self, group: GroupRecord) -> StoreFuture<'_, ()>;
    /// Deletes a group.
    fn delete_group(&self, name: &str) -> StoreFuture<'_, ()>;
    /// Every group.
    fn list_groups(&self) -> StoreFuture<'_, Vec<GroupRecord>>;
}
