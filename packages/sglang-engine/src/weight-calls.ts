import type { SGLangClient } from './client.ts';
import type { CallOptions } from './engine-transport.ts';
import type { SuccessMessage } from './protocol.ts';

export type WeightUpdate =
  | {
      source: 'disk';
      modelPath: string;
      weightVersion: string;
      loadFormat?: string;
      abortAllRequests?: boolean;
    }
  | {
      source: 'distributed';
      weightVersion: string;
      names: string[];
      dtypes: string[];
      shapes: number[][];
      groupName?: string;
      flushCache?: boolean;
      abortAllRequests?: boolean;
    }
  | {
      /** update_weights_from_tensor: one payload per TP rank (rank r loads `serializedNamedTensors[r]`), each what
       * SGLang's MultiprocessingSerializer made of the rank's named tensors (bytes, or CUDA IPC handles of tensors
       * a co-located trainer holds), base64. */
      source: 'tensor';
      weightVersion: string;
      serializedNamedTensors: string[];
      loadFormat?: string;
      flushCache?: boolean;
      abortAllRequests?: boolean;
    }
  | { source: 'version'; weightVersion: string; abortAllRequests?: boolean };

/** The endpoint and the call of one weight update, by its source. `version` only relabels (weights pushed by
 * another path); the others load and set the version with the weights. */
export function weightCall(
  client: SGLangClient,
  req: WeightUpdate,
  opts: { load: CallOptions; control: CallOptions },
): { path: string; result: Promise<SuccessMessage> } {
  const abort = req.abortAllRequests === undefined ? {} : { abort_all_requests: req.abortAllRequests };
  switch (req.source) {
    case 'disk':
      return {
        path: '/update_weights_from_disk',
        result: client.updateWeightsFromDisk(
          {
            model_path: req.modelPath,
            weight_version: req.weightVersion,
            ...(req.loadFormat === undefined ? {} : { load_format: req.loadFormat }),
            ...abort,
          },
          opts.load,
        ),
      };
    case 'distributed':
      return {
        path: '/update_weights_from_distributed',
        result: client.updateWeightsFromDistributed(
          {
            names: req.names,
            dtypes: req.dtypes,
            shapes: req.shapes,
            weight_version: req.weightVersion,
            flush_cache: req.flushCache ?? true,
            abort_all_requests: req.abortAllRequests ?? false,
            ...(req.groupName === undefined ? {} : { group_name: req.groupName }),
          },
          opts.load,
        ),
      };
    case 'tensor':
      return {
        path: '/update_weights_from_tensor',
        result: client.updateWeightsFromTensor(
          {
            serialized_named_tensors: req.serializedNamedTensors,
            weight_version: req.weightVersion,
            flush_cache: req.flushCache ?? true,
            ...(req.loadFormat === undefined ? {} : { load_format: req.loadFormat }),
            ...abort,
          },
          opts.load,
        ),
      };
    case 'version':
      return {
        path: '/update_weight_version',
        result: client.updateWeightVersion(
          { new_version: req.weightVersion, abort_all_requests: req.abortAllRequests ?? false },
          opts.control,
        ),
      };
  }
}
