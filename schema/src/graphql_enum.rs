//! Enums whose values are a GraphQL enum's: each variant is declared once with its GraphQL
//! value ([`graphql_enum!`]), and the query crate registers the GraphQL enum from
//! [`GraphqlEnum::VALUES`], so the two cannot disagree.

/// An enum of the read model that is served as a GraphQL enum.
pub trait GraphqlEnum: Copy + 'static {
    /// Every variant, in declaration order.
    const ALL: &'static [Self];
    /// The GraphQL value of every variant, in declaration order (`ALL[i].as_graphql() == VALUES[i]`).
    const VALUES: &'static [&'static str];

    /// The GraphQL value of this variant, e.g. `FOUR_EYES`.
    fn as_graphql(self) -> &'static str;
}

/// Declares an enum with the GraphQL value of each variant (`Variant = "VALUE"`), and derives
/// from it the inherent `as_str` (the value) and [`GraphqlEnum`]. Variants keep their
/// declaration order, so the stored encoding is that of the plain enum.
macro_rules! graphql_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident = $value:literal, )+
        }
    ) => {
        $(#[$meta])*
        pub enum $name {
            $( $(#[$variant_meta])* $variant, )+
        }

        impl $name {
            #[doc = concat!("The GraphQL enum value (", $( "`", $value, "` ", )+ ").")]
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $value, )+
                }
            }
        }

        impl $crate::graphql_enum::GraphqlEnum for $name {
            const ALL: &'static [Self] = &[$( $name::$variant, )+];
            const VALUES: &'static [&'static str] = &[$( $value, )+];

            fn as_graphql(self) -> &'static str {
                self.as_str()
            }
        }
    };
}
pub(crate) use graphql_enum;
