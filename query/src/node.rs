//! The `Node` interface and the `node`/`nodes` root fields: any visible record by its global ID.

use crate::entity::{Builder, Loader};
use crate::error::not_found;
use crate::request::RequestContext;
use async_graphql::dynamic::{Field, FieldValue, InputValue, Interface, InterfaceField, TypeRef};
use async_graphql::Error;
use schema::GlobalId;
use std::collections::HashMap;
use std::sync::Arc;

/// Registers the `Node` interface and the `node`/`nodes` query fields; returns the node loaders
/// (for [`crate::changes`]).
pub fn register_node(builder: &mut Builder) -> Arc<HashMap<&'static str, Loader>> {
    builder.interfaces.push(Interface::new("Node").field(InterfaceField::new("id", TypeRef::named_nn(TypeRef::ID))));
    let loaders = Arc::new(std::mem::take(&mut builder.loaders));
    let returned = loaders.clone();
    let l1 = loaders.clone();
    builder.query_fields.push(
        Field::new("node", TypeRef::named("Node"), move |ctx| {
            let loaders = l1.clone();
            let result = (|| {
                let request = ctx.data::<RequestContext>()?;
                let id = ctx.args.try_get("id")?.string()?.to_string();
                load_node(&loaders, request, &id)
            })();
            crate::fields::ready(result.map(Some))
        })
        .argument(InputValue::new("id", TypeRef::named_nn(TypeRef::ID))),
    );
    builder.query_fields.push(
        Field::new("nodes", TypeRef::named_list_nn("Node"), move |ctx| {
            let loaders = loaders.clone();
            let result = (|| -> Result<Option<FieldValue<'static>>, Error> {
                let request = ctx.data::<RequestContext>()?;
                let ids: Vec<String> =
                    ctx.args.try_get("ids")?.list()?.iter().map(|v| v.string().map(str::to_string)).collect::<Result<_, _>>()?;
                let mut out = Vec::with_capacity(ids.len());
                for id in ids {
                    request.deadline.tick()?;
                    match load_node(&loaders, request, &id) {
                        Ok(v) => out.push(v),
                        Err(e) => {
                            let mut err = e.into_server_error(ctx.item.pos);
                            err.path = vec![
                                async_graphql::PathSegment::Field(ctx.item.node.response_key().node.to_string()),
                                async_graphql::PathSegment::Index(out.len()),
                            ];
                            ctx.add_error(err);
                            // Rendered as null by `NullableNodes` (the dynamic schema cannot
                            // put null into a list of an interface type by itself).
                            out.push(FieldValue::NULL);
                        }
                    }
                }
                Ok(Some(FieldValue::list(out)))
            })();
            crate::fields::ready(result)
        })
        .argument(InputValue::new("ids", TypeRef::named_nn_list_nn(TypeRef::ID))),
    );
    returned
}

fn load_node(loaders: &HashMap<&'static str, Loader>, request: &RequestContext, id: &str) -> Result<FieldValue<'static>, Error> {
    let gid = GlobalId::decode(id).map_err(|_| not_found(id))?;
    let loader = loaders.get(gid.type_name.as_str()).ok_or_else(|| not_found(id))?;
    loader(request, &gid.key)?.ok_or_else(|| not_found(id))
}
