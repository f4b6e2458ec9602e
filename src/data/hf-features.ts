import { DataType, type Field, type Schema } from "apache-arrow";

/**
 * The `huggingface` schema metadata that HF `datasets` writes into its parquet files. With it, `datasets` restores
 * the exact Features of a file agentrl wrote, as it would for a file verl wrote through `Dataset.to_parquet`.
 */
export function huggingfaceMetadata(schema: Schema): string {
  const features: Record<string, unknown> = {};
  for (const field of schema.fields) features[field.name] = featureOf(field);
  return pythonJsonDumps({ info: { features } });
}

/** JSON with Python's default `json.dumps` separators (", " and ": "), so the metadata matches byte for byte. */
function pythonJsonDumps(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pythonJsonDumps).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>);
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${pythonJsonDumps(v)}`).join(", ")}}`;
  }
  return JSON.stringify(value);
}

function featureOf(field: Field): unknown {
  const type = field.type;
  if (DataType.isStruct(type)) {
    const out: Record<string, unknown> = {};
    for (const child of type.children) out[child.name] = featureOf(child);
    return out;
  }
  if (DataType.isList(type)) {
    const child = type.children[0];
    if (!child) throw new Error(`list field ${field.name} has no element type`);
    return { feature: featureOf(child), _type: "List" };
  }
  return { dtype: valueDtype(type), _type: "Value" };
}

function valueDtype(type: DataType): string {
  if (DataType.isUtf8(type) || DataType.isLargeUtf8(type)) return "string";
  if (DataType.isBool(type)) return "bool";
  if (DataType.isInt(type)) return `${type.isSigned ? "int" : "uint"}${type.bitWidth}`;
  if (DataType.isFloat(type)) return ["float16", "float32", "float64"][type.precision] ?? "float64";
  throw new Error(`no Hugging Face dtype for arrow type ${String(type)}`);
}
