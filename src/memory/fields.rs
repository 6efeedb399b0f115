//! The one declaration of a memory's own fields: every field a memory
//! carries apart from its id, version, owner, content and lifecycle (each
//! form spells those its own way), with its type and, for each form of a
//! memory, the attributes that form gives it:
//!
//! - `memory`: [`Memory`](crate::memory::Memory), the domain type;
//! - `view`: [`MemoryView`](crate::memory::MemoryView), the JSON of the API;
//! - `front`: the file's front-matter (`store::markdown`);
//! - `import`: a line of an export (`routes::import::ImportedMemory`).
//!
//! Each form is declared with [`memory_form!`], which puts these fields
//! where the form writes `..<form>,`, and is converted into another with
//! [`with_memory_fields!`]. A new field is one entry of [`memory_fields!`];
//! each form then carries it, described in that form's own words (the
//! OpenAPI document takes its descriptions from the wire forms, which is
//! why they are not shared). PostgreSQL keeps its own column list
//! (`store::postgres::rows`), as a schema needs a migration anyway.

/// The table of a memory's own fields, handed to `$then!` (one of the two
/// macros below) ahead of `$input`. Types are written in full so that a
/// form may be declared in any module.
macro_rules! memory_fields {
    ($then:ident, $($input:tt)*) => {
        crate::memory::$then! { @fields [
            category: crate::memory::Category {
                memory []
                view []
                front []
                import []
            }
            created_at: chrono::DateTime<chrono::Utc> {
                memory []
                view []
                front []
                import [
                    /// Not before 1970, nor more than 5 minutes past the server's clock.
                ]
            }
            updated_at: chrono::DateTime<chrono::Utc> {
                memory []
                view []
                front []
                import [
                    /// As `created_at`.
                ]
            }
            supersedes: Option<crate::memory::MemoryId> {
                memory []
                view [
                    /// The previous version, which this one replaces.
                    #[serde(skip_serializing_if = "Option::is_none")]
                ]
                front [#[serde(default, skip_serializing_if = "Option::is_none")]]
                import [#[serde(skip_serializing_if = "Option::is_none")]]
            }
            related: Vec<crate::memory::RelatedEdge> {
                memory []
                view [
                    /// The memory's edges; for a key limited to some namespaces, only
                    /// those to memories it can see.
                ]
                front [#[serde(default, skip_serializing_if = "Vec::is_empty")]]
                import [
                    /// At most 64 edges, each to a memory of the store or of the request.
                    #[serde(default)]
                ]
            }
            importance: Option<f64> {
                memory [
                    /// How much the memory matters, 0..=1.
                ]
                view [#[serde(skip_serializing_if = "Option::is_none")]]
                front [#[serde(default, skip_serializing_if = "Option::is_none")]]
                import [#[serde(skip_serializing_if = "Option::is_none")]]
            }
            session_id: Option<crate::memory::SessionId> {
                memory []
                view [#[serde(skip_serializing_if = "Option::is_none")]]
                front [#[serde(default, skip_serializing_if = "Option::is_none")]]
                import [#[serde(skip_serializing_if = "Option::is_none")]]
            }
            trigger: crate::memory::Origin {
                memory []
                view []
                front []
                import []
            }
            anchors: Vec<crate::memory::Anchor> {
                memory [
                    /// What in the repo the memory is about.
                ]
                view [
                    /// What in the repo the memory is about: files, a name in each, and
                    /// their content hashes when it was written.
                    #[serde(skip_serializing_if = "Vec::is_empty")]
                ]
                front [#[serde(default, skip_serializing_if = "Vec::is_empty")]]
                import [
                    /// At most 32, each (path, symbol) once.
                    #[serde(default, skip_serializing_if = "Vec::is_empty")]
                ]
            }
            commit: Option<crate::memory::CommitId> {
                memory [
                    /// The repo's HEAD when the memory was written.
                ]
                view [
                    /// The repo's HEAD when the memory was written.
                    #[serde(skip_serializing_if = "Option::is_none")]
                ]
                front [#[serde(default, skip_serializing_if = "Option::is_none")]]
                import [#[serde(default, skip_serializing_if = "Option::is_none")]]
            }
            observed_at: Option<chrono::DateTime<chrono::Utc>> {
                memory [
                    /// When its fact was said or became true, when that is not when it
                    /// was written (see [`Memory::observed`]).
                ]
                view [
                    /// When its fact was said or became true; left out when that is
                    /// `created_at`.
                    #[serde(skip_serializing_if = "Option::is_none")]
                ]
                front [#[serde(default, skip_serializing_if = "Option::is_none")]]
                import [
                    /// When its fact was said or became true (left out: `created_at`);
                    /// bounded as `created_at`.
                    #[serde(default, skip_serializing_if = "Option::is_none")]
                ]
            }
        ] $($input)* }
    };
}
pub(crate) use memory_fields;

/// Declares one form of a memory: a struct whose fields are its own and,
/// where it writes `..<form>,` (`memory`, `view`, `front` or `import`),
/// those of [`memory_fields!`] with that form's attributes, in the table's
/// order (files and the OpenAPI document keep it).
macro_rules! memory_form {
    (@fields $fields:tt
        $(#[$attr:meta])* $vis:vis struct $name:ident {
            $($(#[$head_attr:meta])* pub $head:ident: $head_ty:ty,)*
            ..$form:ident,
            $($(#[$tail_attr:meta])* pub $tail:ident: $tail_ty:ty,)*
        }
    ) => {
        crate::memory::memory_form! { @pick $form $fields
            { $(#[$attr])* $vis struct $name }
            { $($(#[$head_attr])* pub $head: $head_ty,)* }
            { $($(#[$tail_attr])* pub $tail: $tail_ty,)* }
        }
    };
    (@pick memory [$($field:ident: $ty:ty {
        memory [$($memory:tt)*] view [$($view:tt)*] front [$($front:tt)*] import [$($import:tt)*]
    })*] { $($header:tt)* } { $($head:tt)* } { $($tail:tt)* }) => {
        $($header)* { $($head)* $($($memory)* pub $field: $ty,)* $($tail)* }
    };
    (@pick view [$($field:ident: $ty:ty {
        memory [$($memory:tt)*] view [$($view:tt)*] front [$($front:tt)*] import [$($import:tt)*]
    })*] { $($header:tt)* } { $($head:tt)* } { $($tail:tt)* }) => {
        $($header)* { $($head)* $($($view)* pub $field: $ty,)* $($tail)* }
    };
    (@pick front [$($field:ident: $ty:ty {
        memory [$($memory:tt)*] view [$($view:tt)*] front [$($front:tt)*] import [$($import:tt)*]
    })*] { $($header:tt)* } { $($head:tt)* } { $($tail:tt)* }) => {
        $($header)* { $($head)* $($($front)* pub $field: $ty,)* $($tail)* }
    };
    (@pick import [$($field:ident: $ty:ty {
        memory [$($memory:tt)*] view [$($view:tt)*] front [$($front:tt)*] import [$($import:tt)*]
    })*] { $($header:tt)* } { $($head:tt)* } { $($tail:tt)* }) => {
        $($header)* { $($head)* $($($import)* pub $field: $ty,)* $($tail)* }
    };
    (@$($malformed:tt)*) => {
        compile_error!(
            "memory_form!: expected a struct whose fields are each `pub name: Type,`, with `..memory,`, `..view,`, `..front,` or `..import,` among them"
        );
    };
    ($($declaration:tt)*) => {
        crate::memory::memory_fields! { memory_form, $($declaration)* }
    };
}
pub(crate) use memory_form;

/// Builds a struct literal of one form from a value of another, moving
/// every field of [`memory_fields!`]: `with_memory_fields!(Target { id: ..,
/// version: .. } from source)`, `source` a local variable whose fields are
/// moved and `Target { .. }` the fields each form spells its own way.
macro_rules! with_memory_fields {
    (@fields [$($field:ident: $ty:ty { $($forms:tt)* })*]
        $target:ident { $($own:tt)* } from $source:ident
    ) => {
        $target { $($own)* $($field: $source.$field,)* }
    };
    (@$($malformed:tt)*) => {
        compile_error!("with_memory_fields!: expected `Target { own fields } from source`");
    };
    ($($conversion:tt)*) => {
        crate::memory::memory_fields! { with_memory_fields, $($conversion)* }
    };
}
pub(crate) use with_memory_fields;
