//! Random-looking runs that are public by construction, recognised by
//! what they decode to rather than by the words around them: an SSH public
//! key's blob (`AAAAC3NzaC1lZDI1NTE5…`, which opens with its own key type)
//! and an IPFS content id (`Qm…`, a SHA-256 multihash in base58).

use super::encoded::decode_base64;

/// Key types an SSH public key blob opens with (`ssh-ed25519`,
/// `ecdsa-sha2-nistp256`, `sk-ssh-ed25519@openssh.com`, their
/// certificates).
const SSH_KEY_TYPE_PREFIXES: [&str; 4] = ["ssh-", "ecdsa-", "sk-", "rsa-"];

/// The base58 alphabet of Bitcoin and IPFS: no `0`, `O`, `I` or `l`.
const BASE58: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// The multihash header of a SHA-256 digest: code 0x12, length 32.
const SHA256_MULTIHASH: [u8; 2] = [0x12, 0x20];

/// Whether `token` is an SSH public key's blob or an IPFS content id.
pub fn is_public_id(token: &str) -> bool {
    is_ssh_public_key(token) || is_ipfs_cid(token)
}

/// The base64 of an SSH public key: a 4-byte length, then that many bytes
/// of key type. A private key or a token does not decode to that.
fn is_ssh_public_key(token: &str) -> bool {
    let Some(blob) = token.find("AAAA").map(|at| &token[at..]) else {
        return false;
    };
    let whole = &blob[..blob.len() / 4 * 4];
    let Some(bytes) = decode_base64(whole) else {
        return false;
    };
    let Some((length, rest)) = bytes.split_first_chunk::<4>() else {
        return false;
    };
    let length = usize::try_from(u32::from_be_bytes(*length)).unwrap_or(usize::MAX);
    rest.get(..length)
        .and_then(|key_type| std::str::from_utf8(key_type).ok())
        .is_some_and(|key_type| {
            key_type.bytes().all(|b| b.is_ascii_graphic())
                && SSH_KEY_TYPE_PREFIXES
                    .iter()
                    .any(|prefix| key_type.starts_with(prefix))
        })
}

/// A CIDv0 (`Qm` and 44 more base58 characters) or a base58 CIDv1 (`z…`),
/// of a SHA-256 multihash. A CIDv0's header only narrows the check (about
/// a third of `Qm` runs of that length decode to it); its shape is what
/// makes a random token unlikely to be taken for one.
fn is_ipfs_cid(token: &str) -> bool {
    if token.len() == 46 && token.starts_with("Qm") {
        return decode_base58(token)
            .is_some_and(|bytes| bytes.len() == 34 && bytes.starts_with(&SHA256_MULTIHASH));
    }
    // Version 1, a one- or two-byte codec varint, then the multihash.
    token
        .strip_prefix('z')
        .and_then(decode_base58)
        .is_some_and(|bytes| {
            let after_codec = match bytes.get(1) {
                Some(codec) if codec & 0x80 == 0 => 2,
                Some(_) => 3,
                None => return false,
            };
            bytes.first() == Some(&1)
                && bytes.len() == after_codec + 34
                && bytes[after_codec..].starts_with(&SHA256_MULTIHASH)
        })
}

/// Base58 to bytes (leading `1`s are zero bytes), `None` off the alphabet.
/// Quadratic, for runs of at most a few dozen characters.
fn decode_base58(text: &str) -> Option<Vec<u8>> {
    // Little-endian base-256 digits of the number.
    let mut number: Vec<u8> = Vec::with_capacity(text.len());
    for c in text.bytes() {
        let mut carry = u32::try_from(BASE58.iter().position(|&d| d == c)?).ok()?;
        for byte in &mut number {
            carry += u32::from(*byte) * 58;
            *byte = carry.to_le_bytes()[0];
            carry >>= 8;
        }
        while carry > 0 {
            number.push(carry.to_le_bytes()[0]);
            carry >>= 8;
        }
    }
    let zeros = text.bytes().take_while(|&c| c == b'1').count();
    let mut bytes = vec![0; zeros];
    bytes.extend(number.iter().rev());
    Some(bytes)
}
