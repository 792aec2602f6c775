//! What `switchyard members` and `/admin/members` do to the stored members:
//! one place, so the CLI (with the gateway stopped or running) and the
//! admin API change them alike.

use secrecy::SecretString;
use serde::Serialize;

use super::{hash_key, new_key, Member, MemberError, MemberState, NewMember};
use crate::history::Store;

/// A member as listed: the stored fields and its state now.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct MemberView {
    #[serde(flatten)]
    pub member: Member,
    pub state: MemberState,
}

impl MemberView {
    pub fn of(member: Member, now_ms: i64) -> MemberView {
        let state = member.state(now_ms);
        MemberView { member, state }
    }
}

pub async fn list(store: &Store) -> Result<Vec<Member>, MemberError> {
    Ok(store.members().await?)
}

pub async fn get(store: &Store, name: &str) -> Result<Member, MemberError> {
    list(store).await?.into_iter().find(|m| m.name == name).ok_or_else(|| MemberError::NotFound(name.into()))
}

/// Adds a member; returns it and its key, which is shown this once.
pub async fn add(store: &Store, new: &NewMember, now_ms: i64) -> Result<(Member, SecretString), MemberError> {
    let key = new_key();
    let member = new.build(&key, now_ms)?;
    if list(store).await?.iter().any(|m| m.name == member.name) {
        return Err(MemberError::Exists(member.name));
    }
    store.put_member(&member).await?;
    Ok((member, key))
}

/// A new key for a member (the old one stops working); it is active again
/// if it had been revoked.
pub async fn rotate(store: &Store, name: &str) -> Result<(Member, SecretString), MemberError> {
    let mut member = get(store, name).await?;
    let key = new_key();
    member.key_hash = hash_key(&key);
    member.revoked_at_ms = None;
    store.put_member(&member).await?;
    Ok((member, key))
}

/// Refuses the member's key from now on; the member and its rows stay.
pub async fn revoke(store: &Store, name: &str, now_ms: i64) -> Result<Member, MemberError> {
    let mut member = get(store, name).await?;
    member.revoked_at_ms.get_or_insert(now_ms);
    store.put_member(&member).await?;
    Ok(member)
}

/// Deletes the member; its requests stay on record under its name.
pub async fn remove(store: &Store, name: &str) -> Result<(), MemberError> {
    if store.remove_member(name).await? {
        Ok(())
    } else {
        Err(MemberError::NotFound(name.into()))
    }
}
