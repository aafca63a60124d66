//! Strings across the boundary: the caller's as (pointer, length) pairs,
//! read during the call only; the core's handed to the completion function,
//! valid during that call only.

use std::os::raw::c_char;

use rlock_core::Error;

/// A string of the caller's: `len` bytes of UTF-8 at `ptr` (no NUL needed).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RlockStr {
    pub ptr: *const c_char,
    pub len: usize,
}

impl RlockStr {
    /// The string, copied; not UTF-8 (or a null pointer with a length) is
    /// bad input, named as `what`.
    ///
    /// # Safety
    /// `ptr` points at `len` readable bytes, or `len` is 0.
    pub unsafe fn read(&self, what: &str) -> Result<String, Error> {
        if self.len == 0 {
            return Ok(String::new());
        }
        if self.ptr.is_null() {
            return Err(Error::invalid(format!(
                "{what} is a null pointer of {} bytes",
                self.len
            )));
        }
        let bytes = std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len);
        String::from_utf8(bytes.to_vec())
            .map_err(|_| Error::invalid(format!("{what} is not UTF-8")))
    }
}

impl RlockStr {
    /// The bytes, copied, whatever they hold (a null pointer: none).
    ///
    /// # Safety
    /// As [`RlockStr::read`].
    pub unsafe fn bytes(&self) -> Vec<u8> {
        if self.len == 0 || self.ptr.is_null() {
            return Vec::new();
        }
        std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len).to_vec()
    }
}

/// Several strings of the caller's.
///
/// # Safety
/// `items` points at `n` readable [`RlockStr`], each readable as
/// [`RlockStr::read`] requires, or `n` is 0.
pub unsafe fn read_all(items: *const RlockStr, n: usize, what: &str) -> Result<Vec<String>, Error> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if items.is_null() {
        return Err(Error::invalid(format!(
            "{what} is a null pointer of {n} items"
        )));
    }
    std::slice::from_raw_parts(items, n)
        .iter()
        .map(|s| s.read(what))
        .collect()
}
