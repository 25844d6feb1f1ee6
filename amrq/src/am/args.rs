//! Typed args: what a typed handler takes and a call answers, carried as the user words
//! of a Short frame. A value is one word ([`Arg`]: integers, floats, `bool`, `char`,
//! ranks), a tuple of up to eight, a `#[repr(C)]` plain-data struct declared with
//! [`plain_args!`](crate::plain_args), or up to seven raw words ([`Words`]). What a peer
//! sent is checked as it is decoded: too few words, or a word out of its type's range,
//! is the sender's fault, never a panic.

use super::AmError;
use crate::conduit::ring::MAX_ARGS;
use crate::conduit::Rank;

/// Why a message's words do not decode as a handler's args.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgError {
    /// The message carries fewer words than the args take (`index` is the first one
    /// missing).
    Missing {
        /// The first word missing.
        index: usize,
    },
    /// Word `index` is outside its type's range (a `bool` that is not 0 or 1, a `u32`
    /// above `u32::MAX`, …).
    OutOfRange {
        /// The word.
        index: usize,
    },
}

impl ArgError {
    /// As the error of a handler of `source`'s message of `nargs` words.
    pub(crate) fn of(self, source: Rank, nargs: usize) -> AmError {
        match self {
            ArgError::Missing { index } => AmError::MissingArg {
                source_rank: source,
                index,
                nargs,
            },
            ArgError::OutOfRange { index } => AmError::BadArg {
                source_rank: source,
                index,
            },
        }
    }

    fn shifted(self, by: usize) -> Self {
        match self {
            ArgError::Missing { index } => ArgError::Missing { index: index + by },
            ArgError::OutOfRange { index } => ArgError::OutOfRange { index: index + by },
        }
    }
}

/// A value that travels as one word.
///
/// ```
/// use amrq::am::Arg;
/// assert_eq!((-3i32).to_word(), (-3i64) as u64);
/// assert_eq!(i32::from_word((-3i64) as u64), Some(-3));
/// assert_eq!(bool::from_word(2), None); // only 0 and 1 are bools
/// assert_eq!(f64::from_word(1.5f64.to_word()), Some(1.5));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not one word: an arg is an integer, a float, a `bool` or a `char`"
)]
pub trait Arg: Copy + 'static {
    /// Its word.
    fn to_word(self) -> u64;
    /// The value of `word`; `None` if `word` is outside the type's range.
    fn from_word(word: u64) -> Option<Self>;
}

macro_rules! unsigned_arg {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            #[inline(always)]
            fn to_word(self) -> u64 {
                self as u64
            }
            #[inline(always)]
            fn from_word(word: u64) -> Option<Self> {
                <$t>::try_from(word).ok()
            }
        }
    )*};
}
unsigned_arg!(u8, u16, u32, u64, usize);

macro_rules! signed_arg {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            #[inline(always)]
            fn to_word(self) -> u64 {
                self as i64 as u64 // sign-extended
            }
            #[inline(always)]
            fn from_word(word: u64) -> Option<Self> {
                <$t>::try_from(word as i64).ok()
            }
        }
    )*};
}
signed_arg!(i8, i16, i32, i64, isize);

impl Arg for f64 {
    #[inline(always)]
    fn to_word(self) -> u64 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_word(word: u64) -> Option<Self> {
        Some(f64::from_bits(word))
    }
}

impl Arg for f32 {
    #[inline(always)]
    fn to_word(self) -> u64 {
        u64::from(self.to_bits())
    }
    #[inline(always)]
    fn from_word(word: u64) -> Option<Self> {
        u32::try_from(word).ok().map(f32::from_bits)
    }
}

impl Arg for bool {
    #[inline(always)]
    fn to_word(self) -> u64 {
        u64::from(self)
    }
    #[inline(always)]
    fn from_word(word: u64) -> Option<Self> {
        match word {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
}

impl Arg for char {
    #[inline(always)]
    fn to_word(self) -> u64 {
        u64::from(u32::from(self))
    }
    #[inline(always)]
    fn from_word(word: u64) -> Option<Self> {
        u32::try_from(word).ok().and_then(char::from_u32)
    }
}

/// What a typed handler takes and a call answers: at most eight words (a Short frame's
/// user words; a call's args and answer at most [`CALL_ARGS`](super::CALL_ARGS), as one
/// word names the call). Implemented for every [`Arg`], for `()` and tuples of up to
/// eight args, for [`Words`], and by [`plain_args!`](crate::plain_args) for a
/// `#[repr(C)]` plain-data struct; implement it yourself for any other encoding.
///
/// ```
/// use amrq::am::{Args, ArgError};
/// let mut w = [0u64; 8];
/// assert_eq!((7u32, -1.5f64, true).to_words(&mut w), 3);
/// assert_eq!(<(u32, f64, bool)>::from_words(&w[..3]), Ok((7, -1.5, true)));
/// assert_eq!(<(u32, f64, bool)>::from_words(&w[..2]), Err(ArgError::Missing { index: 2 }));
/// ```
///
/// Nine args are not args:
///
/// ```compile_fail
/// use amrq::am::Args;
/// fn words<A: Args>(_: A) {}
/// words((1u8, 2u8, 3u8, 4u8, 5u8, 6u8, 7u8, 8u8, 9u8));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a handler's args: use a word (integer, float, bool, char), a tuple of up to 8 words, `amrq::am::Words`, or a #[repr(C)] plain-data struct declared with `amrq::plain_args!`"
)]
pub trait Args: Sized + 'static {
    /// The most words it takes (at most eight).
    const WORDS: usize;
    /// Writes its words at the start of `out`, which holds at least [`Args::WORDS`];
    /// returns how many.
    fn to_words(&self, out: &mut [u64]) -> usize;
    /// Decodes the words a message carries (extra words are ignored).
    fn from_words(words: &[u64]) -> Result<Self, ArgError>;
}

impl<T: Arg> Args for T {
    const WORDS: usize = 1;
    #[inline(always)]
    fn to_words(&self, out: &mut [u64]) -> usize {
        out[0] = self.to_word();
        1
    }
    #[inline(always)]
    fn from_words(words: &[u64]) -> Result<Self, ArgError> {
        let word = *words.first().ok_or(ArgError::Missing { index: 0 })?;
        T::from_word(word).ok_or(ArgError::OutOfRange { index: 0 })
    }
}

macro_rules! tuple_args {
    ($n:expr; $($t:ident $i:tt),*) => {
        impl<$($t: Arg),*> Args for ($($t,)*) {
            const WORDS: usize = $n;
            #[inline(always)]
            #[allow(unused_variables)]
            fn to_words(&self, out: &mut [u64]) -> usize {
                let out = &mut out[..$n];
                $(out[$i] = self.$i.to_word();)*
                $n
            }
            #[inline(always)]
            #[allow(unused_variables, unused_comparisons)]
            fn from_words(words: &[u64]) -> Result<Self, ArgError> {
                if words.len() < $n {
                    return Err(ArgError::Missing { index: words.len() });
                }
                Ok(($(
                    $t::from_word(words[$i]).ok_or(ArgError::OutOfRange { index: $i })?,
                )*))
            }
        }
    };
}
tuple_args!(0;);
tuple_args!(1; A 0);
tuple_args!(2; A 0, B 1);
tuple_args!(3; A 0, B 1, C 2);
tuple_args!(4; A 0, B 1, C 2, D 3);
tuple_args!(5; A 0, B 1, C 2, D 3, E 4);
tuple_args!(6; A 0, B 1, C 2, D 3, E 4, F 5);
tuple_args!(7; A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_args!(8; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// Up to seven raw words ([`CALL_ARGS`](super::CALL_ARGS): as many as a call's args
/// may take), as many as a message carries: for a handler that takes a varying number
/// of args (the C interface's calls).
///
/// ```
/// use amrq::am::{Args, Words};
/// let w = Words::new(&[1, 2, 3]).unwrap();
/// assert_eq!(w.as_slice(), [1, 2, 3]);
/// assert_eq!(Words::from_words(&[4, 5]).unwrap().as_slice(), [4, 5]);
/// assert!(Words::new(&[0; 8]).is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Words {
    len: usize,
    words: [u64; MAX_ARGS - 1],
}

impl Words {
    /// `words`; `None` if there are more than seven.
    pub fn new(words: &[u64]) -> Option<Self> {
        let mut w = Words {
            len: words.len(),
            words: [0; MAX_ARGS - 1],
        };
        w.words.get_mut(..words.len())?.copy_from_slice(words);
        Some(w)
    }

    /// The words.
    pub fn as_slice(&self) -> &[u64] {
        &self.words[..self.len]
    }
}

impl Args for Words {
    const WORDS: usize = MAX_ARGS - 1;
    fn to_words(&self, out: &mut [u64]) -> usize {
        let n = self.len.min(out.len());
        out[..n].copy_from_slice(&self.words[..n]);
        n
    }
    fn from_words(words: &[u64]) -> Result<Self, ArgError> {
        let n = words.len().min(MAX_ARGS - 1); // the eighth ignored, as any extra word
        Ok(Words::new(&words[..n]).unwrap_or_default())
    }
}

/// Declares `#[repr(C)]` plain-data structs as handlers' [`Args`]: each is copied
/// into words as its bytes. The struct derives `bytemuck::Pod` (every bit pattern
/// valid, no padding: checked by the derive) and must fit eight words (64 bytes),
/// checked where it is declared.
///
/// ```
/// use amrq::am::Args;
/// #[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
/// #[repr(C)]
/// struct Particle { x: f64, y: f64, id: u32, kind: u32 }
/// amrq::plain_args!(Particle);
///
/// let p = Particle { x: 1.0, y: -2.0, id: 7, kind: 3 };
/// let mut w = [0u64; 8];
/// assert_eq!(p.to_words(&mut w), 3);
/// assert_eq!(Particle::from_words(&w[..3]), Ok(p));
/// ```
///
/// A struct larger than 64 bytes is refused where it is declared:
///
/// ```compile_fail
/// #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
/// #[repr(C)]
/// struct Big([u64; 9]);
/// amrq::plain_args!(Big);
/// ```
#[macro_export]
macro_rules! plain_args {
    ($($t:ty),+ $(,)?) => {$(
        const _: () = ::core::assert!(
            ::core::mem::size_of::<$t>() <= 64,
            "a plain_args! struct fits a Short frame's 8 words (64 bytes): send a larger one as a Medium payload"
        );
        impl $crate::am::Args for $t {
            const WORDS: usize = ::core::mem::size_of::<$t>().div_ceil(8);
            #[inline(always)]
            fn to_words(&self, out: &mut [u64]) -> usize {
                $crate::am::plain_to_words(self, out)
            }
            #[inline(always)]
            fn from_words(words: &[u64]) -> ::core::result::Result<Self, $crate::am::ArgError> {
                $crate::am::plain_from_words(words)
            }
        }
    )+};
}

/// [`plain_args!`]'s encoding: `v`'s bytes in the first words of `out`.
#[doc(hidden)]
#[inline(always)]
pub fn plain_to_words<T: bytemuck::Pod>(v: &T, out: &mut [u64]) -> usize {
    let n = size_of::<T>().div_ceil(8);
    let out = &mut out[..n];
    if let Some(last) = out.last_mut() {
        *last = 0; // the bytes past the struct's end
    }
    bytemuck::cast_slice_mut::<u64, u8>(out)[..size_of::<T>()]
        .copy_from_slice(bytemuck::bytes_of(v));
    n
}

/// [`plain_args!`]'s decoding.
#[doc(hidden)]
#[inline(always)]
pub fn plain_from_words<T: bytemuck::Pod>(words: &[u64]) -> Result<T, ArgError> {
    let n = size_of::<T>().div_ceil(8);
    let words = words
        .get(..n)
        .ok_or(ArgError::Missing { index: words.len() })?;
    Ok(bytemuck::pod_read_unaligned(
        &bytemuck::cast_slice::<u64, u8>(words)[..size_of::<T>()],
    ))
}

/// A call's args after its first word (the call's id): as [`Args::from_words`], with
/// the index of a bad word counted from the message's first.
#[inline(always)]
pub(crate) fn after_first<A: Args>(words: &[u64]) -> Result<A, ArgError> {
    A::from_words(words.get(1..).unwrap_or(&[])).map_err(|e| e.shifted(1))
}
